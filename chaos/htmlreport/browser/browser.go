// Package browser checks an HTML page in a real headless Chromium: it loads
// the page from disk, records what a reader's browser would complain about
// (console errors, uncaught exceptions, error log entries) and every request
// that left the page, counts elements by CSS selector and can write a
// screenshot. It exists to check Gauntlet's self-contained HTML chaos report,
// which must render with no errors and no network, but it takes any page.
//
// The browser is Debian's chromium (ci/chromium.sh installs it), driven
// through the DevTools protocol with chromedp. It runs headless and without
// its sandbox, because the checks run as root in CI containers.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Defaults for the zero fields of Options.
const (
	// DefaultWidth is the viewport width in CSS pixels.
	DefaultWidth = 1400
	// DefaultHeight is the viewport height in CSS pixels.
	DefaultHeight = 900
	// DefaultTimeout bounds a whole Check: browser start, load, checks and
	// screenshot.
	DefaultTimeout = 60 * time.Second
)

// settle is how long Check waits after the document is complete, so that
// timers, late scripts and failed subresources report in before it looks.
const settle = 300 * time.Millisecond

// EnvChromium names the environment variable that points at the Chromium
// binary to use; it wins over PATH.
const EnvChromium = "GAUNTLET_CHROMIUM"

// candidates are the binary names FindChromium looks for on PATH, in order.
var candidates = []string{"chromium", "chromium-browser", "google-chrome"}

// FindChromium returns the path of the Chromium binary to use: the one that
// $GAUNTLET_CHROMIUM names, else the first of chromium, chromium-browser and
// google-chrome found on PATH. The error says how to get one (ci/chromium.sh).
func FindChromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s is not an executable Chromium: %w", EnvChromium, p, err)
		}
		return path, nil
	}
	for _, name := range candidates {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("no Chromium found: %s is unset and none of %s is on PATH; "+
		"run ci/chromium.sh (installs Debian's chromium) or set %s",
		EnvChromium, strings.Join(candidates, ", "), EnvChromium)
}

// Options tunes a Check. The zero value is ready to use.
type Options struct {
	// Exec is the Chromium binary; empty means FindChromium.
	Exec string
	// Width and Height are the viewport size in CSS pixels; zero means
	// DefaultWidth x DefaultHeight.
	Width, Height int
	// FullPage makes the screenshot cover the whole page, not just the
	// viewport.
	FullPage bool
	// Screenshot is the PNG file to write, its parent directories created;
	// empty means no screenshot.
	Screenshot string
	// Count lists CSS selectors whose matches Check counts into
	// Result.Counts.
	Count []string
	// Timeout bounds the whole Check; zero means DefaultTimeout.
	Timeout time.Duration
}

// Result is what Check saw.
type Result struct {
	// Title is the document title.
	Title string
	// ConsoleErrors holds, in order, every console.error and failed
	// console.assert call, every uncaught exception or unhandled promise
	// rejection, and every browser log entry of level error (a failed
	// subresource load, for one). A clean page has none.
	ConsoleErrors []string
	// Requests holds, in the order of their first request and once each,
	// the URLs the page requested other than file:, data: and about: ones.
	// A self-contained page has none.
	Requests []string
	// Counts maps each selector of Options.Count to its number of matches.
	Counts map[string]int
	// Screenshot is the PNG file written, or empty when none was asked for.
	Screenshot string
}

// Check opens the HTML file at path in a fresh headless Chromium, waits until
// the document is complete and a short settle has passed, and reports what it
// saw. Page errors and requests are findings in the Result, not errors; the
// error is for a check that could not be done (no browser, no file, a bad
// selector, a timeout, an unwritable screenshot).
func Check(ctx context.Context, path string, o Options) (*Result, error) {
	o = o.withDefaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("page to check: %w", err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("page to check: %s is a directory", abs)
	}
	if o.Exec == "" {
		if o.Exec, err = FindChromium(); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	allocCtx, allocCancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.Exec),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	)...)
	defer allocCancel()
	rec := &recorder{}
	tabCtx, tabCancel := chromedp.NewContext(allocCtx, chromedp.WithListener(rec.listen))
	defer tabCancel()

	res, err := run(tabCtx, fileURL(abs), o, rec)
	// Close the browser gracefully before the deferred cancels kill it, so
	// that it leaves no processes or profile behind; its error adds nothing.
	_ = chromedp.Cancel(tabCtx)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
		return nil, fmt.Errorf("checking %s in %s: %w", abs, o.Exec, err)
	}
	return res, nil
}

// run drives one tab through the check.
func run(ctx context.Context, pageURL string, o Options, rec *recorder) (*Result, error) {
	// The first Do starts the browser and attaches the tab; chromedp enables
	// these domains itself today, but the events below depend on them.
	if err := chromedp.Do(ctx); err != nil {
		return nil, fmt.Errorf("opening a tab: %w", err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		return nil, fmt.Errorf("enabling Runtime: %w", err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		return nil, fmt.Errorf("enabling Log: %w", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		return nil, fmt.Errorf("enabling Network: %w", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(int64(o.Width), int64(o.Height)),
		chromedp.Navigate(pageURL),
	); err != nil {
		return nil, fmt.Errorf("loading the page: %w", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		return nil, fmt.Errorf("waiting for readyState complete: %w", err)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(settle)); err != nil {
		return nil, fmt.Errorf("settling: %w", err)
	}

	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		return nil, fmt.Errorf("reading the title: %w", err)
	}
	res := &Result{Title: title, Counts: make(map[string]int, len(o.Count))}
	for _, sel := range o.Count {
		quoted, err := json.Marshal(sel)
		if err != nil {
			return nil, fmt.Errorf("quoting selector %q: %w", sel, err)
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			"document.querySelectorAll("+string(quoted)+").length"))
		if err != nil {
			return nil, fmt.Errorf("counting %q: %w", sel, err)
		}
		res.Counts[sel] = n
	}
	if o.Screenshot != "" {
		if err := screenshot(ctx, o.Screenshot, o.FullPage); err != nil {
			return nil, err
		}
		res.Screenshot = o.Screenshot
	}
	res.ConsoleErrors, res.Requests = rec.snapshot()
	return res, nil
}

// screenshot writes a PNG of the viewport, or of the whole page, to path.
func screenshot(ctx context.Context, path string, fullPage bool) error {
	shot := chromedp.CaptureScreenshot()
	if fullPage {
		shot = chromedp.FullScreenshot(100) // 100 means PNG.
	}
	buf, err := chromedp.Run(ctx, shot)
	if err != nil {
		return fmt.Errorf("taking the screenshot: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the screenshot directory: %w", err)
		}
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return fmt.Errorf("writing the screenshot: %w", err)
	}
	return nil
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() Options {
	if o.Width <= 0 {
		o.Width = DefaultWidth
	}
	if o.Height <= 0 {
		o.Height = DefaultHeight
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// fileURL turns an absolute path into a file: URL, escaping what needs it.
func fileURL(abs string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

// recorder collects page events. Its listen runs on chromedp's event loop, so
// it only formats and appends, under a lock.
type recorder struct {
	mu       sync.Mutex
	errors   []string
	requests []string
	seen     map[string]bool
}

// listen is the chromedp listener: it keeps error-level console calls,
// uncaught exceptions, error log entries and outgoing requests.
func (r *recorder) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			r.addError(fmt.Sprintf("console.%s: %s", ev.Type, argsText(ev.Args)))
		}
	case *runtime.EventExceptionThrown:
		r.addError(exceptionText(ev.ExceptionDetails))
	case *log.EventEntryAdded:
		if e := ev.Entry; e != nil && e.Level == log.EntryLevelError {
			msg := fmt.Sprintf("log %s error: %s", e.Source, e.Text)
			if e.URL != "" {
				msg += " (" + e.URL + ")"
			}
			r.addError(msg)
		}
	case *network.EventRequestWillBeSent:
		if ev.Request != nil && !local(ev.Request.URL) {
			r.addRequest(ev.Request.URL)
		}
	}
}

func (r *recorder) addError(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, msg)
}

func (r *recorder) addRequest(u string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[u] {
		return
	}
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[u] = true
	r.requests = append(r.requests, u)
}

// snapshot copies what was recorded so far.
func (r *recorder) snapshot() (errs, requests []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...), append([]string(nil), r.requests...)
}

// local reports whether a requested URL stays inside the browser: the page
// file itself, inline data, or about:blank.
func local(u string) bool {
	scheme, _, ok := strings.Cut(u, ":")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "file", "data", "about":
		return true
	}
	return false
}

// argsText renders console arguments roughly as the DevTools console does:
// strings bare, other values by their description or JSON value.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		if a != nil {
			parts = append(parts, objectText(a))
		}
	}
	return strings.Join(parts, " ")
}

func objectText(o *runtime.RemoteObject) string {
	if o.Type == runtime.RemoteObjectTypeString && len(o.Value) > 0 {
		var s string
		if err := json.Unmarshal(o.Value, &s); err == nil {
			return s
		}
	}
	switch {
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case len(o.Value) > 0:
		return string(o.Value)
	case o.Description != "":
		return o.Description
	}
	return string(o.Type)
}

// exceptionText renders an uncaught exception or unhandled rejection as
// "uncaught: <error> (<where>)".
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "uncaught: (no details)"
	}
	msg := d.Text // "Uncaught", or "Uncaught (in promise)", when there is no object.
	if d.Exception != nil {
		// The description is the error and its stack; the first line is
		// enough here, the location follows.
		msg, _, _ = strings.Cut(objectText(d.Exception), "\n")
		if strings.Contains(d.Text, "in promise") {
			msg = "(in promise) " + msg
		}
	}
	if d.URL != "" {
		msg += fmt.Sprintf(" (%s:%d:%d)", d.URL, d.LineNumber+1, d.ColumnNumber+1)
	}
	return "uncaught: " + msg
}

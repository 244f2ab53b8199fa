package browser

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// skipReason is why the browser tests skip on a machine without Chromium.
const skipReason = "no Chromium: run ci/chromium.sh (Debian's chromium), as make test-report does"

// chromium returns the Chromium to test with. Without one the test skips,
// unless GAUNTLET_REQUIRE_BROWSER=1 (CI's report job), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		if os.Getenv("GAUNTLET_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GAUNTLET_REQUIRE_BROWSER=1 but %v", err)
		}
		t.Skip(skipReason)
	}
	return path
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// browserCase is a page and what Check must report about it.
type browserCase struct {
	name       string
	html       string
	count      []string
	screenshot bool
	// Each wanted error or request must be a substring of one entry.
	wantTitle    string
	wantCounts   map[string]int
	wantErrors   []string
	wantRequests []string
}

func TestBrowserCheck(t *testing.T) {
	exe := chromium(t)
	for _, tt := range browserCases() {
		t.Run(tt.name, func(t *testing.T) { checkPage(t, exe, tt) })
	}
}

// browserCases are pages with and without console errors, exceptions and
// network requests.
func browserCases() []browserCase {
	return []browserCase{
		{
			name: "clean self-contained page",
			html: `<!doctype html><html><head><meta charset="utf-8"><title>Chaos report</title>
<style>.card{border:1px solid #888;height:600px}</style></head>
<body><h1>Report</h1><div class="card">a</div><div class="card">b</div><div class="card">c</div>
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="">
<script>document.querySelector("h1").dataset.ready = "yes"; console.log("fine");</script>
</body></html>`,
			count:      []string{"div.card", "h1[data-ready=yes]", ".missing"},
			screenshot: true,
			wantTitle:  "Chaos report",
			wantCounts: map[string]int{"div.card": 3, "h1[data-ready=yes]": 1, ".missing": 0},
		},
		{
			name: "console.error and a failed console.assert",
			html: `<!doctype html><title>errors</title>
<script>console.error("boom", 42); console.assert(1 === 2, "nope"); console.warn("not an error");</script>`,
			wantTitle:  "errors",
			wantCounts: map[string]int{},
			wantErrors: []string{"console.error: boom 42", "console.assert: ", "nope"},
		},
		{
			name: "uncaught exception",
			html: `<!doctype html><title>throws</title><p>before</p>
<script>function f() { throw new Error("kaboom"); } f();</script>`,
			count:      []string{"p"},
			wantTitle:  "throws",
			wantCounts: map[string]int{"p": 1},
			wantErrors: []string{"uncaught: Error: kaboom"},
		},
		{
			name:       "image from the network",
			html:       `<!doctype html><title>leaky</title><img src="http://127.0.0.1:9/x.png">`,
			wantTitle:  "leaky",
			wantCounts: map[string]int{},
			// Port 9 is one Chromium refuses to fetch from, so the failed load
			// is an error-level log entry too; the request is still recorded.
			wantErrors:   []string{"Failed to load resource", "http://127.0.0.1:9/x.png"},
			wantRequests: []string{"http://127.0.0.1:9/x.png"},
		},
	}
}

// checkPage writes tt's page, runs Check on it with Chromium exe, and
// compares the result with what tt wants.
func checkPage(t *testing.T, exe string, tt browserCase) {
	g := NewWithT(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	g.Expect(os.WriteFile(page, []byte(tt.html), 0o644)).To(Succeed())
	o := Options{Exec: exe, Count: tt.count}
	if tt.screenshot {
		o.Screenshot = filepath.Join(dir, "shots", "nested", "page.png")
		o.FullPage = true
	}

	res, err := Check(t.Context(), page, o)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("console errors: %q", res.ConsoleErrors)
	t.Logf("requests: %q", res.Requests)

	g.Expect(res.Title).To(Equal(tt.wantTitle))
	g.Expect(res.Counts).To(Equal(tt.wantCounts))
	if len(tt.wantErrors) == 0 {
		g.Expect(res.ConsoleErrors).To(BeEmpty())
	}
	for _, want := range tt.wantErrors {
		g.Expect(res.ConsoleErrors).To(ContainElement(ContainSubstring(want)))
	}
	if len(tt.wantRequests) == 0 {
		g.Expect(res.Requests).To(BeEmpty())
	}
	for _, want := range tt.wantRequests {
		g.Expect(res.Requests).To(ContainElement(want))
	}
	if tt.screenshot {
		g.Expect(res.Screenshot).To(Equal(o.Screenshot))
		png, err := os.ReadFile(o.Screenshot)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(png)).To(BeNumerically(">", len(pngMagic)))
		g.Expect(bytes.HasPrefix(png, pngMagic)).To(BeTrue(), "not a PNG")
	} else {
		g.Expect(res.Screenshot).To(BeEmpty())
	}
}

func TestBrowserCheckErrors(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	if err := os.WriteFile(page, []byte(`<!doctype html><title>x</title>`), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		path    string
		o       Options
		wantErr string
	}{
		{name: "missing page", path: filepath.Join(dir, "nope.html"), o: Options{Exec: exe}, wantErr: "page to check"},
		{name: "timeout", path: page, o: Options{Exec: exe, Timeout: 50 * time.Millisecond}, wantErr: "deadline exceeded"},
		{name: "bad selector", path: page, o: Options{Exec: exe, Count: []string{"div["}}, wantErr: `counting "div["`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := Check(t.Context(), tt.path, tt.o)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			if tt.o.Timeout > 0 {
				g.Expect(err).To(MatchError(context.DeadlineExceeded))
			}
			g.Expect(res).To(BeNil())
			t.Logf("error: %v", err)
		})
	}
}

func TestLocal(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"file:///tmp/report.html", true},
		{"data:image/png;base64,AAAA", true},
		{"about:blank", true},
		{"FILE:///x", true},
		{"http://127.0.0.1:9/x.png", false},
		{"https://cdn.example/app.js", false},
		{"blob:file:///abc", false},
		{"no-scheme", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			NewWithT(t).Expect(local(tt.url)).To(Equal(tt.want))
		})
	}
}

func TestFindChromiumEnv(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(EnvChromium, filepath.Join(t.TempDir(), "no-such-chromium"))
	_, err := FindChromium()
	g.Expect(err).To(MatchError(ContainSubstring(EnvChromium)))
}

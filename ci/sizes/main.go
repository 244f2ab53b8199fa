// Command sizes fails when a Go source file or a function is longer than a
// reader can hold at once.
//
// It walks the directories given as arguments (default: the current
// directory, the repository root) and lists every .go file over
// -max-file-lines lines and every function or method over -max-func-lines
// lines, sorted by file and line. A function is measured from its func
// keyword to its closing brace; its doc comment does not count. Tests count
// like any other code. It skips generated files (a "// Code generated ...
// DO NOT EDIT." header), vendor and testdata directories, hidden
// directories, and the wrapper modules under tools/ (each builds a pinned
// binary from someone else's code).
//
// Usage:
//
//	go run ./ci/sizes [-max-file-lines 500] [-max-func-lines 80] [dir ...]
//
// It exits 1 when something is over a limit and 2 when it cannot read or
// parse a file.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// limits are the largest file and function, in lines, that pass.
type limits struct {
	fileLines int
	funcLines int
}

// finding is one file or function over its limit.
type finding struct {
	path  string
	line  int
	what  string // "file" or "func <name>"
	lines int
	max   int
}

func (f finding) String() string {
	if f.what == "package" {
		return fmt.Sprintf("%s: package has %d lines of non-test Go (max %d)", f.path, f.lines, f.max)
	}
	return fmt.Sprintf("%s:%d: %s has %d lines (max %d)", f.path, f.line, f.what, f.lines, f.max)
}

func main() {
	var lim limits
	flag.IntVar(&lim.fileLines, "max-file-lines", 500, "largest .go file, in lines")
	flag.IntVar(&lim.funcLines, "max-func-lines", 80, "largest function, in lines from func to its closing brace")
	pl := packageLimits{allowed: allowances{}}
	flag.StringVar(&pl.root, "packages", "", "a tree whose every package is capped at -max-package-lines of non-test Go (none by default)")
	flag.IntVar(&pl.max, "max-package-lines", 2000, "largest package under -packages, in lines of its non-test files")
	flag.Var(pl.allowed, "package-allow", "DIR=LINES: a larger cap for one package under -packages, while it is being cut (repeat)")
	flag.Usage = func() {
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] [dir ...]\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}

	found, err := check(roots, lim)
	if err == nil && pl.root != "" {
		var pkgs []finding
		pkgs, err = checkPackages(pl)
		found = append(found, pkgs...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizes:", err)
		os.Exit(2)
	}
	for _, f := range found {
		fmt.Println(f)
	}
	if len(found) > 0 {
		fmt.Fprintf(os.Stderr, "sizes: %d over the limits (files %d lines, functions %d lines, packages under %q %d lines)\n",
			len(found), lim.fileLines, lim.funcLines, pl.root, pl.max)
		os.Exit(1)
	}
	fmt.Printf("sizes: no file over %d lines, no function over %d\n", lim.fileLines, lim.funcLines)
	if pl.root != "" {
		fmt.Printf("sizes: no package under %s over %d lines (allowed more: %s)\n", pl.root, pl.max, pl.allowed)
	}
}

// check walks roots and returns what is over lim, sorted by path and line.
func check(roots []string, lim limits) ([]finding, error) {
	var found []finding
	for _, root := range roots {
		files, err := goFiles(root)
		if err != nil {
			return nil, err
		}
		for _, path := range files {
			f, err := checkFile(path, lim)
			if err != nil {
				return nil, err
			}
			found = append(found, f...)
		}
	}
	slices.SortFunc(found, func(a, b finding) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.line - b.line
	})
	return slices.CompactFunc(found, func(a, b finding) bool { return a == b }), nil
}

// goFiles lists the .go files under root, leaving out the directories the
// checker skips.
func goFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(root, path) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// skipDir reports whether the walk from root leaves out the directory at
// path: vendor, testdata, hidden directories, and modules under tools/.
func skipDir(root, path string) bool {
	name := filepath.Base(path)
	if name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".") {
		return true
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || !slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), "tools") {
		return false
	}
	_, err = os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// checkFile returns what in the file at path is over lim; nothing for a
// generated file.
func checkFile(path string, lim limits) ([]finding, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(file) {
		return nil, nil
	}

	var found []finding
	if n := lineCount(src); n > lim.fileLines {
		found = append(found, finding{path: path, line: 1, what: "file", lines: n, max: lim.fileLines})
	}
	for _, decl := range file.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		start := fset.Position(fd.Type.Func).Line
		end := fset.Position(fd.End()).Line
		if fd.Body != nil {
			end = fset.Position(fd.Body.Rbrace).Line
		}
		if n := end - start + 1; n > lim.funcLines {
			found = append(found, finding{path: path, line: start, what: "func " + funcName(fd), lines: n, max: lim.funcLines})
		}
	}
	return found, nil
}

// lineCount counts lines as wc -l does, plus a last line without a newline.
func lineCount(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// funcName names a function as a reader searches for it: Name, T.Name or
// (*T).Name.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	pointer := false
	if star, ok := typ.(*ast.StarExpr); ok {
		pointer, typ = true, star.X
	}
	// Drop type parameters: T[K, V] is named T.
	switch t := typ.(type) {
	case *ast.IndexExpr:
		typ = t.X
	case *ast.IndexListExpr:
		typ = t.X
	}
	recv := "?"
	if id, ok := typ.(*ast.Ident); ok {
		recv = id.Name
	}
	if pointer {
		return "(*" + recv + ")." + fd.Name.Name
	}
	return recv + "." + fd.Name.Name
}

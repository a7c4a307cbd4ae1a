package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is this module's path, from go.mod.
const module = "github.com/epitaph-mq/epitaph"

// root is the name used here for the package at the module root.
const root = "epitaph"

// allowed maps each broker package (a top-level directory; sub-packages such
// as router/store count as their parent) to the broker packages it may
// import, from test files as well as non-test files. The module root
// package is "epitaph". Anything not listed is forbidden.
var allowed = map[string][]string{
	"value":       nil,
	"amqp10":      {"value"},
	"amqp091":     {"value"},
	"alarm":       nil,
	"annotations": {"amqp10", "value"},
	"config":      nil,
	"dlevents":    nil, // the dead-letter event stream: standard library only, below its publisher and its front ends
	"internal":    nil, // test hooks only this module can reach (internal/testhooks)
	"router":      {"amqp10", "amqp091", "annotations", "alarm", "value"},
	"filter":      {"amqp10", "annotations", "router", "value"}, // amqp10 in tests only (TestProtocolNeutralCore)
	"auth":        {"amqp10", "router", "value"},
	"telemetry":   {"amqp10", "router", "value"},
	"deadletter":  {"amqp10", "annotations", "dlevents", "router", "telemetry", "value"},
	"link":        {"amqp10", "amqp091", "auth", "config", "dlevents", "filter", "router", "telemetry", "value"},
	"channel":     {"amqp091", "annotations", "auth", "config", "link", "router", "telemetry", "value"},
	"management":  {"amqp10", "annotations", "auth", "router", "deadletter", "dlevents", "filter", "value"},
	root:          {"amqp10", "annotations", "auth", "channel", "config", "dlevents", "internal", "router", "deadletter", "filter", "link", "management", "telemetry", "value"},
}

// apart lists groups of sub-packages of one layer that must not import each
// other (nor each other's sub-packages), from test files as well as
// non-test files. The management front ends each speak one protocol; what
// they share lives in management itself.
var apart = [][]string{
	{"management/httpapi", "management/amqpnode"},
}

// apartViolation reports which package of its group the file at path (a
// module-relative file path) may not import with imp, if any.
func apartViolation(path, imp string) (string, bool) {
	rest, ok := strings.CutPrefix(imp, module+"/")
	if !ok {
		return "", false
	}
	within := func(p, pkg string) bool { return p == pkg || strings.HasPrefix(p, pkg+"/") }
	for _, group := range apart {
		for _, own := range group {
			if !within(path, own) {
				continue
			}
			for _, other := range group {
				if other != own && within(rest, other) {
					return other, true
				}
			}
		}
	}
	return "", false
}

// anything lists the top-level directories whose packages may import any
// module package: commands and end-to-end tests.
var anything = []string{"cmd", "e2e"}

// thirdParty restricts the non-standard-library imports of non-test files.
// A package missing from this map is not restricted.
var thirdParty = map[string][]string{
	"value":    nil, // standard library only
	"amqp10":   nil, // standard library only
	"amqp091":  nil, // standard library only
	"alarm":    nil, // standard library only
	"dlevents": nil, // standard library only
	"config":   {"github.com/spf13/viper", "github.com/spf13/pflag"},
}

// noPrint lists the library packages that must not print or exit: only
// cmd/epitaph writes to stdout and calls os.Exit.
var noPrint = []string{"value", "amqp10", "amqp091", "channel", "alarm", "auth", "annotations", "router", "deadletter", "dlevents", "filter", "link", "management", "config", "internal", "telemetry", root}

// goFile is one parsed Go file (imports and, for non-test files, the body).
type goFile struct {
	path string // relative to the module root
	pkg  string // layer: top-level directory, or root
	test bool
	ast  *ast.File
}

// moduleRoot is the directory holding go.mod, the parent of e2e.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(gomod), "module "+module+"\n", "unexpected go.mod in %s", dir)
	return dir
}

// parseModule parses every .go file of the module that the go tool would see
// (all build tags included), skipping testdata, vendor, node_modules and
// hidden or underscore directories. Empty directories yield nothing.
func parseModule(t *testing.T) []goFile {
	t.Helper()
	dir := moduleRoot(t)
	fset := token.NewFileSet()
	var files []goFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p != dir {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module is not part of this one
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := root
		if top, _, ok := strings.Cut(rel, "/"); ok {
			pkg = top
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, goFile{path: rel, pkg: pkg, test: strings.HasSuffix(name, "_test.go"), ast: f})
		return nil
	})
	require.NoError(t, err)
	return files
}

// importPaths returns the unquoted import paths of f.
func importPaths(f *ast.File) []string {
	var paths []string
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err == nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// layerOf maps a module import path to its layer: the module path itself is
// root, module/router/store is "router". ok is false for other modules.
func layerOf(imp string) (layer string, ok bool) {
	if imp == module {
		return root, true
	}
	rest, ok := strings.CutPrefix(imp, module+"/")
	if !ok {
		return "", false
	}
	layer, _, _ = strings.Cut(rest, "/")
	return layer, true
}

// isStdlib reports whether imp is a standard-library path (no dot in the
// first element), as the go tool decides.
func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func TestLayering(t *testing.T) {
	files := parseModule(t)
	require.NotEmpty(t, files)
	unknown := map[string]bool{}
	for _, f := range files {
		if slices.Contains(anything, f.pkg) {
			continue
		}
		ok, listed := allowed[f.pkg]
		if !listed {
			if !unknown[f.pkg] {
				unknown[f.pkg] = true
				t.Errorf("%s: package %q is not in the layering table; add it to allowed in e2e/layering_test.go", f.path, f.pkg)
			}
			continue
		}
		for _, imp := range importPaths(f.ast) {
			if other, bad := apartViolation(f.path, imp); bad {
				t.Errorf("%s: imports %s; it must stay apart from %s", f.path, imp, other)
			}
			if dep, inModule := layerOf(imp); inModule {
				if dep != f.pkg && !slices.Contains(ok, dep) {
					t.Errorf("%s: %s imports %s; %s may import only %v", f.path, f.pkg, imp, f.pkg, ok)
				}
				continue
			}
			if f.test || isStdlib(imp) {
				continue
			}
			if only, restricted := thirdParty[f.pkg]; restricted && !slices.ContainsFunc(only, func(m string) bool {
				return imp == m || strings.HasPrefix(imp, m+"/")
			}) {
				t.Errorf("%s: %s imports third-party %s; allowed: %v", f.path, f.pkg, imp, only)
			}
		}
	}
}

// amqp10Files are the router files that may import amqp10: the AMQP 1.0
// container (router/amqp10.go) and the store's AMQP-typed encodings
// (router/amqp10_store.go).
func amqp10File(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "amqp10")
}

// amqp091File: the router files that may import amqp091: the AMQP 0-9-1
// container (router/amqp091*.go) and the conversions between the two
// protocols (router/amqp10_091*.go).
func amqp091File(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, "amqp091") || strings.HasPrefix(base, "amqp10_091")
}

// TestProtocolNeutralCore pins the message-container rule: the router's
// data model names no protocol, except in the containers' own files (AMQP
// 1.0: router/amqp10*.go; AMQP 0-9-1: router/amqp091*.go and the
// conversions, router/amqp10_091.go); the dead-letterer works on the
// neutral model only. Test files may import the codecs: they build
// messages in a protocol's container.
func TestProtocolNeutralCore(t *testing.T) {
	const amqp10Path = module + "/amqp10"
	var sawContainer bool
	for _, f := range parseModule(t) {
		if f.test || (f.pkg != "router" && f.pkg != "deadletter" && f.pkg != "filter") {
			continue
		}
		imports := slices.Contains(importPaths(f.ast), amqp10Path)
		imports091 := slices.Contains(importPaths(f.ast), module+"/amqp091")
		switch {
		case f.pkg == "deadletter" && imports091:
			t.Errorf("%s: deadletter imports amqp091; it works on router.Message's neutral form", f.path)
		case f.pkg == "router" && imports091 && !(amqp091File(f.path) && filepath.Dir(f.path) == "router"):
			t.Errorf("%s: router imports amqp091 outside its AMQP 0-9-1 container files (router/amqp091*.go, router/amqp10_091.go)", f.path)
		}
		switch {
		case f.pkg == "deadletter" && imports:
			t.Errorf("%s: deadletter imports amqp10; it works on router.Message's neutral form", f.path)
		case f.pkg == "filter" && imports:
			t.Errorf("%s: filter imports amqp10; it reads messages through router.FieldReader", f.path)
		case f.pkg == "router" && imports && !(amqp10File(f.path) && filepath.Dir(f.path) == "router"):
			t.Errorf("%s: router imports amqp10 outside its AMQP 1.0 container files (router/amqp10*.go)", f.path)
		}
		sawContainer = sawContainer || (f.path == "router/amqp10.go" && imports)
	}
	require.True(t, sawContainer, "router/amqp10.go (the AMQP 1.0 container) not found or not importing amqp10")
}

// forbiddenCalls are the package-level functions library code must not call,
// keyed by import path.
var forbiddenCalls = map[string]func(name string) bool{
	"fmt": func(n string) bool { return strings.HasPrefix(n, "Print") },
	"log": func(n string) bool {
		return strings.HasPrefix(n, "Print") || strings.HasPrefix(n, "Fatal") || strings.HasPrefix(n, "Panic")
	},
	"os": func(n string) bool { return n == "Exit" },
}

func TestNoPrintInLibraries(t *testing.T) {
	for _, f := range parseModule(t) {
		if f.test || !slices.Contains(noPrint, f.pkg) {
			continue
		}
		// local name -> import path, for the packages we police
		names := map[string]string{}
		for _, spec := range f.ast.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil || forbiddenCalls[p] == nil {
				continue
			}
			name := p
			if spec.Name != nil {
				name = spec.Name.Name
			}
			names[name] = p
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident: // builtin print/println
				if fn.Name == "print" || fn.Name == "println" {
					t.Errorf("%s: calls builtin %s; use an injected *slog.Logger", f.path, fn.Name)
				}
			case *ast.SelectorExpr:
				x, ok := fn.X.(*ast.Ident)
				if !ok {
					return true
				}
				if p, ok := names[x.Name]; ok && forbiddenCalls[p](fn.Sel.Name) {
					t.Errorf("%s: calls %s.%s; library code logs through an injected *slog.Logger and only cmd exits",
						f.path, p, fn.Sel.Name)
				}
			}
			return true
		})
	}
}

// movedOut lists declarations that left a package for one of their own and
// must not come back: router is exchanges, bindings, queues and consumers;
// users, permissions, password hashing and authorization are package auth's,
// the resource alarms package alarm's.
var movedOut = map[string][]string{
	"router": {"User", "Permission", "HashPassword", "HashPasswordWithSalt", "Authorize", "Authenticate",
		"CanAccessVHost", "UserExists", "PutUser", "SetPermission", "SeedDefaults", "Access",
		"CheckAlarms", "PublishBlocked", "alarmState", "diskFree", "memoryUsed"},
}

func TestMovedOut(t *testing.T) {
	for _, f := range parseModule(t) {
		gone := movedOut[f.pkg]
		if f.test || gone == nil || f.ast.Name.Name != f.pkg {
			continue
		}
		for _, d := range f.ast.Decls {
			var names []string
			switch d := d.(type) {
			case *ast.FuncDecl:
				names = append(names, d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names = append(names, s.Name.Name)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names = append(names, n.Name)
						}
					}
				}
			}
			for _, n := range names {
				if slices.Contains(gone, n) {
					t.Errorf("%s: %s declares %s, which belongs to package auth or alarm", f.path, f.pkg, n)
				}
			}
		}
	}
}

// TestLayeringSelfCheck makes sure the checker itself notices violations,
// so that a broken walker cannot pass silently.
func TestLayeringSelfCheck(t *testing.T) {
	dep, ok := layerOf(module + "/router/store")
	require.True(t, ok)
	require.Equal(t, "router", dep)
	dep, ok = layerOf(module)
	require.True(t, ok)
	require.Equal(t, root, dep)
	_, ok = layerOf("github.com/epitaph-mq/epitaphx")
	require.False(t, ok)
	require.True(t, isStdlib("net/http"))
	require.False(t, isStdlib("github.com/spf13/viper"))

	require.True(t, amqp10File("router/amqp10_store.go"))
	require.False(t, amqp10File("router/vhost.go"))
	other, bad := apartViolation("management/httpapi/server.go", module+"/management/amqpnode")
	require.True(t, bad)
	require.Equal(t, "management/amqpnode", other)
	_, bad = apartViolation("management/amqpnode/node.go", module+"/management/httpapi/sub")
	require.True(t, bad)
	_, bad = apartViolation("management/amqpnode/node.go", module+"/management")
	require.False(t, bad)
	_, bad = apartViolation("management/httpapi/server.go", module+"/management/httpapi")
	require.False(t, bad)
	_, bad = apartViolation("management/httpapix/x.go", module+"/management/amqpnode")
	require.False(t, bad)

	var sawAMQP10, sawConfig bool
	for _, f := range parseModule(t) {
		sawAMQP10 = sawAMQP10 || f.pkg == "amqp10"
		sawConfig = sawConfig || f.pkg == "config"
	}
	require.True(t, sawAMQP10, "the walker found no amqp10 files")
	require.True(t, sawConfig, "the walker found no config files")
}

package main

// Reading Kubernetes' generated.proto files: the source of truth for field numbers, wire types,
// repeated/map and message names. These files are machine-written by go-to-protobuf and regular:
// top-level `message Name {` blocks (never nested), one field per line as
// `optional|repeated <type> <name> = <number>;` or `map<string, <type>> <name> = <number>;`,
// comments on their own lines (and a /* */ licence block), a `package` line and an `option go_package = "...";` line. The
// reader below understands exactly that subset and fails loudly on anything else inside a message.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// protoField is one field of a message as the .proto declares it.
type protoField struct {
	Name     string
	Number   int
	Type     string // a scalar ("string", "int32", ...) or a message's full name (no leading dot)
	Repeated bool
	Map      bool // map<string, Type>: Type is the value type
}

// protoMessage is one message: its full name (package + "." + name) and its fields in file order.
type protoMessage struct {
	FullName  string
	GoPackage string
	Name      string
	Fields    []protoField
}

var (
	rePackage   = regexp.MustCompile(`^package ([\w.]+);`)
	reGoPackage = regexp.MustCompile(`^option go_package = "([^"]+)";`)
	reMessage   = regexp.MustCompile(`^message (\w+) \{$`)
	reField     = regexp.MustCompile(`^(optional|repeated) ([\w.]+) (\w+) = (\d+);$`)
	reMap       = regexp.MustCompile(`^map<string, ([\w.]+)> (\w+) = (\d+);$`)
)

var scalars = map[string]bool{"string": true, "bytes": true, "int32": true, "int64": true, "bool": true, "double": true}

// protoSet holds every message of the files read, by full name, and which proto package each Go
// package is.
type protoSet struct {
	messages     map[string]*protoMessage
	protoPackage map[string]string // Go import path -> proto package
}

// readProtoTree reads every generated.proto under root.
func (s *protoSet) readProtoTree(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "generated.proto" {
			return nil
		}
		return s.readProtoFile(path)
	})
}

func (s *protoSet) readProtoFile(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	var pkg, goPkg string
	var current *protoMessage
	var pending []*protoMessage
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	inBlockComment := false // the licence header is a /* ... */ block
	for scanner.Scan() {
		line++
		text := strings.TrimSpace(scanner.Text())
		if inBlockComment {
			inBlockComment = !strings.HasSuffix(text, "*/")
			continue
		}
		if strings.HasPrefix(text, "/*") {
			inBlockComment = !strings.HasSuffix(text, "*/")
			continue
		}
		if text == "" || strings.HasPrefix(text, "//") {
			continue
		}
		fail := func() error { return fmt.Errorf("%s:%d: unexpected line %q", path, line, text) }
		if current == nil {
			if m := rePackage.FindStringSubmatch(text); m != nil {
				pkg = m[1]
			} else if m := reGoPackage.FindStringSubmatch(text); m != nil {
				goPkg = m[1]
			} else if m := reMessage.FindStringSubmatch(text); m != nil {
				current = &protoMessage{Name: m[1]}
			} else if !strings.HasPrefix(text, "syntax") && !strings.HasPrefix(text, "import") && !strings.HasPrefix(text, "option") {
				return fail()
			}
			continue
		}
		if text == "}" {
			pending = append(pending, current)
			current = nil
			continue
		}
		var f protoField
		if m := reField.FindStringSubmatch(text); m != nil {
			f = protoField{Type: m[2], Name: m[3], Repeated: m[1] == "repeated"}
			f.Number, _ = strconv.Atoi(m[4])
		} else if m := reMap.FindStringSubmatch(text); m != nil {
			f = protoField{Type: m[1], Name: m[2], Map: true}
			f.Number, _ = strconv.Atoi(m[3])
		} else {
			return fail()
		}
		current.Fields = append(current.Fields, f)
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	if pkg == "" || goPkg == "" {
		return fmt.Errorf("%s: no package or go_package", path)
	}
	s.protoPackage[goPkg] = pkg
	for _, m := range pending {
		m.FullName = pkg + "." + m.Name
		m.GoPackage = goPkg
		for i := range m.Fields {
			t := m.Fields[i].Type
			switch {
			case scalars[t]:
			case strings.HasPrefix(t, "."):
				m.Fields[i].Type = t[1:]
			default:
				m.Fields[i].Type = pkg + "." + t
			}
		}
		s.messages[m.FullName] = m
	}
	return nil
}

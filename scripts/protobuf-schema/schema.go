package main

// From Go types to the Rust schema table.
//
// The walk starts at every kind the scheme registers (see main.go), finds each Go type's message in
// the .proto files (Go import path -> proto package via `option go_package`, Go type name = message
// name), and emits, per proto field: its number and wire shape from the .proto, and from the Go
// struct field carrying the same number in its `protobuf:"..."` tag: the JSON name, whether it is
// inlined (an embedded struct with an empty JSON name), and its presence (Go pointer, `omitempty`,
// or always written). The tag's number, name and repeated-ness are cross-checked against the
// .proto; any mismatch, or a message this walk does not know how to express, stops the generator.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Messages whose JSON form is not the JSON of their fields: each has a MarshalJSON in Go, and the
// decoder has a rule for each (see core/src/protobuf/mod.rs).
var specialTy = map[string]string{
	"k8s.io.apimachinery.pkg.api.resource.Quantity":                 "Ty::Quantity",
	"k8s.io.apimachinery.pkg.util.intstr.IntOrString":               "Ty::IntOrString",
	"k8s.io.apimachinery.pkg.apis.meta.v1.Time":                     "Ty::Time",
	"k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime":                "Ty::MicroTime",
	"k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1":                 "Ty::Json",
	"k8s.io.apimachinery.pkg.runtime.RawExtension":                  "Ty::Json",
	"k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON": "Ty::Json",
}

// The CRD schema's "or" messages: decoded by their fields, then folded into one JSON shape.
var foldTy = map[string]string{
	"k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray":       "Fold::Array",
	"k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool":        "Fold::Bool",
	"k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray": "Fold::StringArray",
}

// tagNotes lists where a Go tag disagrees with the .proto (hand-written tags are irregular); the
// .proto wins, and -v prints them.
var tagNotes []string

var jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// rustField is one emitted field.
type rustField struct {
	number   int
	json     string
	ty       string
	label    string
	presence string
}

type rustSchema struct {
	ident  string
	name   string
	fields []rustField
}

type topLevel struct {
	apiVersion, kind, ident string
}

type generator struct {
	protos  *protoSet
	schemas map[string]*rustSchema // by proto full name
	idents  map[string]string      // ident -> proto full name, to catch collisions
	kinds   []topLevel
}

// shortName is the message name used in errors and statics: the proto package's last two parts and
// the message ("core.v1.Pod", "meta.v1.ObjectMeta", "apiextensions.v1.JSONSchemaProps").
func shortName(full string) string {
	parts := strings.Split(full, ".")
	if len(parts) < 3 {
		return full
	}
	return strings.Join(parts[len(parts)-3:], ".")
}

// ident turns "core.v1.PodSpec" into CORE_V1_POD_SPEC and "apiextensions.v1.JSONSchemaProps" into
// APIEXTENSIONS_V1_JSON_SCHEMA_PROPS.
func ident(short string) string {
	var b strings.Builder
	runes := []rune(short)
	for i, r := range runes {
		switch {
		case r == '.':
			b.WriteRune('_')
			continue
		case i > 0 && isUpper(r) && runes[i-1] != '.':
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && isLower(runes[i+1])
			if isLower(prev) || isDigit(prev) || (isUpper(prev) && nextLower) {
				b.WriteRune('_')
			}
		}
		b.WriteString(strings.ToUpper(string(r)))
	}
	return b.String()
}

func isUpper(r rune) bool { return r >= 'A' && r <= 'Z' }
func isLower(r rune) bool { return r >= 'a' && r <= 'z' }
func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// protoName is the full proto message name of a named Go type.
func (g *generator) protoName(t reflect.Type) (string, bool) {
	pkg, ok := g.protos.protoPackage[t.PkgPath()]
	if !ok || t.Name() == "" {
		return "", false
	}
	full := pkg + "." + t.Name()
	_, ok = g.protos.messages[full]
	return full, ok
}

// message emits the schema of Go type t (and, first, of every message it reaches) and returns its
// static's identifier.
func (g *generator) message(t reflect.Type) (string, error) {
	full, ok := g.protoName(t)
	if !ok {
		return "", fmt.Errorf("Go type %s.%s has no protobuf message", t.PkgPath(), t.Name())
	}
	if s, done := g.schemas[full]; done {
		return s.ident, nil
	}
	short := shortName(full)
	id := ident(short)
	if other, taken := g.idents[id]; taken && other != full {
		return "", fmt.Errorf("static name %s for both %s and %s", id, other, full)
	}
	g.idents[id] = full
	out := &rustSchema{ident: id, name: short}
	// Registered before the fields are walked: JSONSchemaProps reaches itself.
	g.schemas[full] = out
	msg := g.protos.messages[full]
	if t.Kind() == reflect.Slice {
		// A named Go slice (`type ExtraValue []string`) that protobuf wraps in a message
		// {repeated items = 1}; its JSON form is the bare array.
		if len(msg.Fields) != 1 || msg.Fields[0].Number != 1 || !msg.Fields[0].Repeated {
			return "", fmt.Errorf("%s: a Go slice whose message is not {repeated items = 1}", full)
		}
		ty, err := g.fieldTy(full, msg.Fields[0], t.Elem())
		if err != nil {
			return "", err
		}
		out.fields = append(out.fields, rustField{1, "items", ty, "Label::Repeated", "Presence::OmitEmpty"})
		return id, nil
	}
	if t.Kind() != reflect.Struct {
		return "", fmt.Errorf("%s: Go type %s is neither a struct nor a slice", full, t)
	}
	if _, fold := foldTy[full]; !fold && (t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)) {
		return "", fmt.Errorf("%s has its own MarshalJSON: give it a rule in specialTy or foldTy", full)
	}
	byNumber := map[int]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("protobuf")
		if !ok {
			continue
		}
		parts := strings.Split(tag, ",")
		if len(parts) < 2 {
			return "", fmt.Errorf("%s.%s: protobuf tag %q", full, sf.Name, tag)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			return "", fmt.Errorf("%s.%s: protobuf tag %q", full, sf.Name, tag)
		}
		byNumber[n] = sf
	}
	if len(byNumber) != len(msg.Fields) {
		return "", fmt.Errorf("%s: %d fields in .proto, %d tagged Go fields", full, len(msg.Fields), len(byNumber))
	}
	fields := append([]protoField(nil), msg.Fields...)
	sort.Slice(fields, func(i, j int) bool { return fields[i].Number < fields[j].Number })
	for _, pf := range fields {
		sf, ok := byNumber[pf.Number]
		if !ok {
			return "", fmt.Errorf("%s field %d (%s): no Go field tagged with it", full, pf.Number, pf.Name)
		}
		field, err := g.field(full, pf, sf)
		if err != nil {
			return "", err
		}
		out.fields = append(out.fields, field)
	}
	return id, nil
}

// field cross-checks one proto field against its Go struct field and emits it.
func (g *generator) field(msg string, pf protoField, sf reflect.StructField) (rustField, error) {
	where := fmt.Sprintf("%s field %d (%s, Go %s)", msg, pf.Number, pf.Name, sf.Name)
	parts := strings.Split(sf.Tag.Get("protobuf"), ",")
	// Some tags are hand-written and irregular ("bytes,3,name=fieldManager" without opt, "bytes,1,req"
	// without a name): read what is there.
	wire, rep, name := parts[0], false, ""
	for _, p := range parts[2:] {
		rep = rep || p == "rep"
		if strings.HasPrefix(p, "name=") {
			name = strings.TrimPrefix(p, "name=")
		}
	}
	if name != "" && name != pf.Name {
		return rustField{}, fmt.Errorf("%s: Go tag names it %q", where, name)
	}
	// Go tags of maps say "rep" or "opt", either; the Go type's shape is checked below.
	if !pf.Map && rep != pf.Repeated {
		tagNotes = append(tagNotes, where+": repeated in the Go tag or the .proto only")
	}
	wantWire := map[string]string{"int32": "varint", "int64": "varint", "bool": "varint", "double": "fixed64"}[pf.Type]
	if wantWire == "" {
		wantWire = "bytes"
	}
	if wire != wantWire {
		// The .proto wins: ListMeta's remainingItemCount is tagged "bytes" but is an int64 on the
		// wire (its generated marshaller writes a varint).
		tagNotes = append(tagNotes, fmt.Sprintf("%s: Go tag wire type %s, .proto type %s", where, wire, pf.Type))
	}
	jsonTag, hasJSON := sf.Tag.Lookup("json")
	jsonParts := strings.Split(jsonTag, ",")
	jsonName := jsonParts[0]
	if jsonName == "-" {
		return rustField{}, fmt.Errorf("%s: on the wire but not in JSON (json:\"-\")", where)
	}
	omit := false
	for _, o := range jsonParts[1:] {
		if o == "omitempty" || o == "omitzero" {
			omit = true
		}
	}
	label := "Label::One"
	switch {
	case pf.Map:
		label = "Label::Map"
	case pf.Repeated:
		label = "Label::Repeated"
	case sf.Anonymous && jsonName == "":
		// encoding/json inlines an embedded struct without a JSON name (`VolumeSource` in Volume).
		label = "Label::Inline"
	}
	if jsonName == "" && !sf.Anonymous {
		if hasJSON && jsonTag != "" && !strings.HasPrefix(jsonTag, ",") {
			return rustField{}, fmt.Errorf("%s: odd json tag %q", where, jsonTag)
		}
		if _, fold := foldTy[msg]; fold {
			// The "or" messages' fields have no JSON names (their MarshalJSON writes one shape):
			// the proto names, which the decoder's fold rule reads.
			jsonName = pf.Name
		} else {
			// encoding/json's default: the Go field name.
			jsonName = sf.Name
		}
	}
	// Presence: what encoding/json does with the field's zero value.
	goType := sf.Type
	presence := "Presence::Always"
	switch {
	case goType.Kind() == reflect.Pointer:
		presence = "Presence::Pointer"
	case goType.Kind() == reflect.Struct && !hasOption(jsonParts, "omitzero"):
		// omitempty never omits a struct: a zero IntOrString is written as 0, a zero Quantity as "0".
		presence = "Presence::Always"
	case omit:
		presence = "Presence::OmitEmpty"
	}
	// The element type: what a repeated field holds, a map's value, a pointer's target.
	elem := goType
	if elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	if pf.Map {
		if elem.Kind() != reflect.Map || elem.Key().Kind() != reflect.String {
			return rustField{}, fmt.Errorf("%s: a proto map that is not a Go map with string keys", where)
		}
		elem = elem.Elem()
	} else if pf.Repeated {
		if elem.Kind() != reflect.Slice {
			return rustField{}, fmt.Errorf("%s: repeated but Go type %s", where, goType)
		}
		elem = elem.Elem()
	}
	if elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	ty, err := g.fieldTy(where, pf, elem)
	if err != nil {
		return rustField{}, err
	}
	if label == "Label::Inline" && !strings.HasPrefix(ty, "Ty::Message(") {
		return rustField{}, fmt.Errorf("%s: inlined but not a plain message", where)
	}
	return rustField{pf.Number, jsonName, ty, label, presence}, nil
}

func hasOption(parts []string, option string) bool {
	for _, p := range parts[1:] {
		if p == option {
			return true
		}
	}
	return false
}

// fieldTy is the Rust `Ty` of one value of proto type pf.Type held in Go as elem.
func (g *generator) fieldTy(where string, pf protoField, elem reflect.Type) (string, error) {
	kindOK := map[string][]reflect.Kind{
		"string": {reflect.String},
		"int32":  {reflect.Int32},
		"int64":  {reflect.Int64},
		"bool":   {reflect.Bool},
		"double": {reflect.Float64},
	}
	switch pf.Type {
	case "bytes":
		if elem.Kind() != reflect.Slice || elem.Elem().Kind() != reflect.Uint8 {
			return "", fmt.Errorf("%s: bytes held in Go as %s", where, elem)
		}
		return "Ty::Bytes", nil
	case "string", "int32", "int64", "bool", "double":
		for _, k := range kindOK[pf.Type] {
			if elem.Kind() == k {
				return "Ty::" + map[string]string{"string": "String", "int32": "Int32", "int64": "Int64", "bool": "Bool", "double": "Double"}[pf.Type], nil
			}
		}
		return "", fmt.Errorf("%s: %s held in Go as %s", where, pf.Type, elem)
	}
	full, ok := g.protoName(elem)
	if !ok || full != pf.Type {
		return "", fmt.Errorf("%s: .proto type %s, Go type %s (%s)", where, pf.Type, elem, full)
	}
	if ty, special := specialTy[full]; special {
		return ty, nil
	}
	id, err := g.message(elem)
	if err != nil {
		return "", err
	}
	if fold, isFold := foldTy[full]; isFold {
		return fmt.Sprintf("Ty::Fold(&%s, %s)", id, fold), nil
	}
	if elem.Kind() == reflect.Slice {
		return fmt.Sprintf("Ty::Wrapped(&%s)", id), nil
	}
	return fmt.Sprintf("Ty::Message(&%s)", id), nil
}

// rust writes the generated Rust file.
func (g *generator) rust(header string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("\nuse super::{Field, Fold, Label, Presence, Schema, TopLevel, Ty};\n\n")
	b.WriteString("/// Every top-level kind, sorted by (apiVersion, kind): what [`super::top_level`] searches.\n")
	b.WriteString("pub static KINDS: &[TopLevel] = &[\n")
	sort.Slice(g.kinds, func(i, j int) bool {
		if g.kinds[i].apiVersion != g.kinds[j].apiVersion {
			return g.kinds[i].apiVersion < g.kinds[j].apiVersion
		}
		return g.kinds[i].kind < g.kinds[j].kind
	})
	for _, k := range g.kinds {
		fmt.Fprintf(&b, "    TopLevel::new(%q, %q, &%s),\n", k.apiVersion, k.kind, k.ident)
	}
	b.WriteString("];\n")
	names := make([]string, 0, len(g.schemas))
	for full := range g.schemas {
		names = append(names, full)
	}
	sort.Slice(names, func(i, j int) bool { return g.schemas[names[i]].ident < g.schemas[names[j]].ident })
	for _, full := range names {
		s := g.schemas[full]
		fmt.Fprintf(&b, "\n/// `%s`\npub static %s: Schema = Schema::new(\n    %q,\n    &[\n", full, s.ident, s.name)
		for _, f := range s.fields {
			fmt.Fprintf(&b, "        Field::new(%d, %q, %s, %s, %s),\n", f.number, f.json, f.ty, f.label, f.presence)
		}
		b.WriteString("    ],\n);\n")
	}
	return b.String()
}

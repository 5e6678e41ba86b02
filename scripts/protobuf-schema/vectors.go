package main

// Differential test vectors: for every top-level kind but the lists, two objects filled
// deterministically by reflection, each written twice by Go itself: as client-go sends it
// (Kubernetes' protobuf serializer: "k8s\0" + runtime.Unknown) and as encoding/json writes it.
//
//   - "full": every field set to a non-zero value (strings "s<n>", numbers n, booleans true, one
//     element per list and map), pointers allocated; recursive types (a CRD's JSONSchemaProps) stop
//     at two levels.
//   - "zero": every pointer allocated to its zero value, every list and map holding one zero element,
//     every other scalar left zero: the cases where presence (pointer, omitempty) decides.
//
// Special types get values of their own kind: Quantity a canonical quantity, IntOrString
// alternately a number and a string, Time whole seconds (plus nanoseconds, which neither form
// keeps), MicroTime microseconds, RawExtension/FieldsV1/JSON small JSON texts.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	tQuantity    = reflect.TypeOf(resource.Quantity{})
	tIntOrString = reflect.TypeOf(intstr.IntOrString{})
	tTime        = reflect.TypeOf(metav1.Time{})
	tMicroTime   = reflect.TypeOf(metav1.MicroTime{})
	tRaw         = reflect.TypeOf(runtime.RawExtension{})
	tFieldsV1    = reflect.TypeOf(metav1.FieldsV1{})
	tJSON        = reflect.TypeOf(apiextensionsv1.JSON{})
	tTypeMeta    = reflect.TypeOf(metav1.TypeMeta{})
)

// filler sets values; n counts up so that every value differs from the last.
type filler struct {
	n    int
	zero bool
	// How many times each struct type is on the path from the top: recursion stops at 2.
	path map[reflect.Type]int
}

func (f *filler) next() int {
	f.n++
	return f.n
}

// limited reports whether a value of type t (behind a pointer, list or map) would recurse too deep.
func (f *filler) limited(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		if t.Kind() == reflect.Map {
			t = t.Elem()
		} else {
			t = t.Elem()
		}
	}
	return t.Kind() == reflect.Struct && f.path[t] >= 2
}

func (f *filler) fill(v reflect.Value) {
	t := v.Type()
	switch t {
	case tQuantity:
		if !f.zero {
			v.Set(reflect.ValueOf(resource.MustParse(fmt.Sprintf("%dm", f.next()*250))))
		}
		return
	case tIntOrString:
		n := f.next()
		switch {
		case f.zero:
		case n%2 == 0:
			v.Set(reflect.ValueOf(intstr.FromInt32(int32(n))))
		default:
			v.Set(reflect.ValueOf(intstr.FromString(fmt.Sprintf("p%d", n))))
		}
		return
	case tTime:
		if !f.zero {
			v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(int64(1_700_000_000+f.next()), 987_654_321).UTC())))
		}
		return
	case tMicroTime:
		if !f.zero {
			n := f.next()
			v.Set(reflect.ValueOf(metav1.NewMicroTime(time.Unix(int64(1_700_000_000+n), int64(n*1000+7)).UTC())))
		}
		return
	case tRaw:
		if !f.zero {
			v.Set(reflect.ValueOf(runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"n":%d,"a":["x",true,null]}`, f.next()))}))
		}
		return
	case tFieldsV1:
		if !f.zero {
			v.Set(reflect.ValueOf(metav1.FieldsV1{Raw: []byte(fmt.Sprintf(`{"f:s%d":{}}`, f.next()))}))
		}
		return
	case tJSON:
		if !f.zero {
			v.Set(reflect.ValueOf(apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`[%d,"s",{"b":false}]`, f.next()))}))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if f.limited(t.Elem()) {
			return
		}
		p := reflect.New(t.Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Struct:
		f.path[t]++
		defer func() { f.path[t]-- }()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() || sf.Type == tTypeMeta {
				continue
			}
			if _, onWire := sf.Tag.Lookup("protobuf"); !onWire {
				continue
			}
			f.fill(v.Field(i))
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if !f.zero {
				n := f.next()
				v.SetBytes([]byte{byte(n), 0xff, 0, byte(n >> 8)})
			} else {
				v.SetBytes([]byte{})
			}
			return
		}
		if f.limited(t.Elem()) {
			return
		}
		s := reflect.MakeSlice(t, 1, 1)
		f.fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		if f.limited(t.Elem()) {
			return
		}
		m := reflect.MakeMap(t)
		key := reflect.New(t.Key()).Elem()
		key.SetString(fmt.Sprintf("k%d", f.next()))
		value := reflect.New(t.Elem()).Elem()
		f.fill(value)
		m.SetMapIndex(key, value)
		v.Set(m)
	case reflect.String:
		if !f.zero {
			v.SetString(fmt.Sprintf("s%d", f.next()))
		}
	case reflect.Int32, reflect.Int64:
		if !f.zero {
			v.SetInt(int64(f.next()))
		}
	case reflect.Bool:
		v.SetBool(!f.zero)
	case reflect.Float64:
		if !f.zero {
			v.SetFloat(float64(f.next()) + 0.25)
		}
	case reflect.Interface:
		// RawExtension.Object: not on the wire (Raw is).
	default:
		panic(fmt.Sprintf("no filler for %s", t))
	}
}

// vector is one line of the fixture.
type vector struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Case       string          `json:"case"`
	Protobuf   string          `json:"protobuf"`
	JSON       json.RawMessage `json:"json"`
}

func writeVectors(scheme *runtime.Scheme, gvks []schema.GroupVersionKind, path string) error {
	serializer := protobuf.NewSerializer(scheme, scheme)
	var out bytes.Buffer
	done := map[reflect.Type]bool{}
	for _, gvk := range gvks {
		t := scheme.AllKnownTypes()[gvk]
		// Lists repeat their items' messages; the options kinds are registered in every group
		// version: one vector per Go type.
		if strings.HasSuffix(gvk.Kind, "List") || done[t] {
			continue
		}
		done[t] = true
		for _, zero := range []bool{false, true} {
			obj, err := scheme.New(gvk)
			if err != nil {
				return err
			}
			f := &filler{zero: zero, path: map[reflect.Type]int{}}
			f.fill(reflect.ValueOf(obj).Elem())
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			if obj.GetObjectKind().GroupVersionKind() != gvk {
				// No TypeMeta to carry the kind (WatchEvent): never a request body.
				break
			}
			text, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("%s: JSON: %w", gvk, err)
			}
			var pb bytes.Buffer
			if err := serializer.Encode(obj, &pb); err != nil {
				return fmt.Errorf("%s: protobuf: %w", gvk, err)
			}
			name := map[bool]string{false: "full", true: "zero"}[zero]
			line, err := json.Marshal(vector{gvk.GroupVersion().String(), gvk.Kind, name, base64.StdEncoding.EncodeToString(pb.Bytes()), text})
			if err != nil {
				return err
			}
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

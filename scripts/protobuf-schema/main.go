// Command protobuf-schema writes ferrokube's protobuf schema table (core/src/protobuf/generated.rs)
// and the differential test vectors (apiserver/tests/fixtures/protobuf/vectors.jsonl) from
// Kubernetes' own API modules. Run it through scripts/protobuf-schema.sh, which passes the module
// directories; see that script for why the table comes from both the .proto files and the Go types.
//
// Flags: -modules dir,dir,...  (module roots whose generated.proto files are read)
//
//	-rust FILE -vectors FILE    (outputs)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// Every GA group version of k8s.io/api (a directory named v<N>), plus apiextensions.k8s.io/v1 and
// apiregistration.k8s.io/v1. Alpha and beta versions are left out: kube-apiserver serves few of them
// by default and the embedded server none. checkCoverage fails when k8s.io/api gains a GA version
// that is not listed here.
var addToScheme = map[string]func(*runtime.Scheme) error{
	"admission/v1":             admissionv1.AddToScheme,
	"admissionregistration/v1": admissionregistrationv1.AddToScheme,
	"apidiscovery/v2":          apidiscoveryv2.AddToScheme,
	"apps/v1":                  appsv1.AddToScheme,
	"authentication/v1":        authenticationv1.AddToScheme,
	"authorization/v1":         authorizationv1.AddToScheme,
	"autoscaling/v1":           autoscalingv1.AddToScheme,
	"autoscaling/v2":           autoscalingv2.AddToScheme,
	"batch/v1":                 batchv1.AddToScheme,
	"certificates/v1":          certificatesv1.AddToScheme,
	"coordination/v1":          coordinationv1.AddToScheme,
	"core/v1":                  corev1.AddToScheme,
	"discovery/v1":             discoveryv1.AddToScheme,
	"events/v1":                eventsv1.AddToScheme,
	"flowcontrol/v1":           flowcontrolv1.AddToScheme,
	"networking/v1":            networkingv1.AddToScheme,
	"node/v1":                  nodev1.AddToScheme,
	"policy/v1":                policyv1.AddToScheme,
	"rbac/v1":                  rbacv1.AddToScheme,
	"resource/v1":              resourcev1.AddToScheme,
	"scheduling/v1":            schedulingv1.AddToScheme,
	"storage/v1":               storagev1.AddToScheme,
	"storagemigration/v1":      storagemigrationv1.AddToScheme,
	"apiextensions/v1":         apiextensionsv1.AddToScheme,
	"apiregistration/v1":       apiregistrationv1.AddToScheme,
}

var gaVersion = regexp.MustCompile(`^v[0-9]+$`)

// checkCoverage fails if k8s.io/api has a GA group version (a <group>/v<N> directory with a
// generated.proto) that addToScheme does not list.
func checkCoverage(apiDir string) error {
	matches, err := filepath.Glob(filepath.Join(apiDir, "*", "*", "generated.proto"))
	if err != nil {
		return err
	}
	for _, m := range matches {
		version := filepath.Base(filepath.Dir(m))
		group := filepath.Base(filepath.Dir(filepath.Dir(m)))
		if gaVersion.MatchString(version) {
			if _, ok := addToScheme[group+"/"+version]; !ok {
				return fmt.Errorf("k8s.io/api has %s/%s, which the generator does not register", group, version)
			}
		}
	}
	return nil
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	names := make([]string, 0, len(addToScheme))
	for name := range addToScheme {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := addToScheme[name](scheme); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	// meta.k8s.io/v1: PartialObjectMetadata, Table..., and the options kinds under it.
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return scheme, nil
}

// knownKinds is every (group version, kind) of the scheme but the internal ones, sorted.
func knownKinds(scheme *runtime.Scheme) []schema.GroupVersionKind {
	var gvks []schema.GroupVersionKind
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool {
		a, b := gvks[i].GroupVersion().String(), gvks[j].GroupVersion().String()
		if a != b {
			return a < b
		}
		return gvks[i].Kind < gvks[j].Kind
	})
	return gvks
}

func run() error {
	modules := flag.String("modules", "", "comma-separated module roots: k8s.io/api first")
	rustOut := flag.String("rust", "", "the Rust file to write")
	vectorsOut := flag.String("vectors", "", "the JSON-lines test vectors to write")
	header := flag.String("header", "", "the Rust file's header comment")
	verbose := flag.Bool("v", false, "list where Go tags disagree with the .proto")
	flag.Parse()
	if *modules == "" || *rustOut == "" || *vectorsOut == "" {
		return fmt.Errorf("usage: protobuf-schema -modules DIR,... -rust FILE -vectors FILE")
	}
	protos := &protoSet{messages: map[string]*protoMessage{}, protoPackage: map[string]string{}}
	dirs := strings.Split(*modules, ",")
	for _, dir := range dirs {
		if err := protos.readProtoTree(dir); err != nil {
			return err
		}
	}
	if err := checkCoverage(dirs[0]); err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	g := &generator{protos: protos, schemas: map[string]*rustSchema{}, idents: map[string]string{}}
	var skipped []string
	kinds := knownKinds(scheme)
	var withSchema []schema.GroupVersionKind
	for _, gvk := range kinds {
		t := scheme.AllKnownTypes()[gvk]
		if _, ok := g.protoName(t); !ok {
			skipped = append(skipped, gvk.GroupVersion().String()+" "+gvk.Kind)
			continue
		}
		id, err := g.message(t)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		g.kinds = append(g.kinds, topLevel{gvk.GroupVersion().String(), gvk.Kind, id})
		withSchema = append(withSchema, gvk)
	}
	fmt.Fprintf(os.Stderr, "protobuf-schema: %d kinds, %d messages; no protobuf message (left out): %s\n",
		len(g.kinds), len(g.schemas), strings.Join(skipped, ", "))
	fmt.Fprintf(os.Stderr, "protobuf-schema: %d Go tags disagree with the .proto on wire type or repeatedness (the .proto wins; -v lists them)\n", len(tagNotes))
	if *verbose {
		for _, note := range tagNotes {
			fmt.Fprintln(os.Stderr, "  "+note)
		}
	}
	if err := os.WriteFile(*rustOut, []byte(g.rust(*header)), 0o644); err != nil {
		return err
	}
	return writeVectors(scheme, withSchema, *vectorsOut)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "protobuf-schema:", err)
		os.Exit(1)
	}
}

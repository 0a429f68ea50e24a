package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestJobFileResources: each resource key of a job-file line, as a person
// writes it and as a marshalled JobSpec carries it.
func TestJobFileResources(t *testing.T) {
	t.Parallel()
	const pre = `{"target":"t","command":"x",`
	for _, c := range []struct {
		name, line string
		want       Resources
		err        string // a substring of the error; "" for none
	}{
		{"cpus count", pre + `"cpus":4}`, Resources{CPUs: 4}, ""},
		{"cpus string", pre + `"cpus":"8"}`, Resources{CPUs: 8}, ""},
		{"cpus auto", pre + `"cpus":"auto"}`, Resources{CPUsAuto: true}, ""},
		{"cpus auto wire", pre + `"cpus_auto":true}`, Resources{CPUsAuto: true}, ""},
		{"mem size", pre + `"mem":"8G"}`, Resources{Mem: 8 << 30}, ""},
		{"mem fraction", pre + `"mem":"1.5g"}`, Resources{Mem: 3 << 29}, ""},
		{"mem MiB number", pre + `"mem":500}`, Resources{Mem: 500 << 20}, ""},
		{"mem auto", pre + `"mem":"auto"}`, Resources{MemAuto: true}, ""},
		{"mem bytes wire", pre + `"mem_bytes":1048576}`, Resources{Mem: 1 << 20}, ""},
		{"gpus", pre + `"gpus":2}`, Resources{GPUs: 2}, ""},
		{"named", pre + `"resources":{"licence":1,"scratch_gb":100}}`, Resources{Named: map[string]int{"licence": 1, "scratch_gb": 100}}, ""},
		{"all", pre + `"cpus":2,"mem":"4G","gpus":1,"resources":{"fpga":1}}`, Resources{CPUs: 2, Mem: 4 << 30, GPUs: 1, Named: map[string]int{"fpga": 1}}, ""},

		{"cpus zero", pre + `"cpus":0}`, Resources{}, "at least 1"},
		{"cpus negative", pre + `"cpus":-1}`, Resources{}, "positive integer"},
		{"cpus fraction", pre + `"cpus":1.5}`, Resources{}, "positive integer"},
		{"cpus huge", pre + `"cpus":100000000}`, Resources{}, "more than"},
		{"cpus bool", pre + `"cpus":true}`, Resources{}, `"cpus": want a positive integer or "auto"`},
		{"cpus and auto", pre + `"cpus":2,"cpus_auto":true}`, Resources{}, "not both"},
		{"mem bad unit", pre + `"mem":"8X"}`, Resources{}, "unknown unit"},
		{"mem exponent", pre + `"mem":"1e30"}`, Resources{}, "unknown unit"},
		{"mem exponent number", pre + `"mem":1e30}`, Resources{}, "unknown unit"},
		{"mem too large", pre + `"mem":"9000T"}`, Resources{}, "more than 1024 TiB"},
		{"mem zero", pre + `"mem":"0G"}`, Resources{}, "more than zero"},
		{"mem object", pre + `"mem":{}}`, Resources{}, `"mem": want a size`},
		{"mem twice", pre + `"mem":"1G","mem_bytes":5}`, Resources{}, "not both"},
		{"mem bytes negative", pre + `"mem_bytes":-5}`, Resources{}, "more than zero"},
		{"gpus zero", pre + `"gpus":0}`, Resources{}, "at least 1"},
		{"gpus many", pre + `"gpus":65}`, Resources{}, "more than 64"},
		{"named bad name", pre + `"resources":{"9lives":1}}`, Resources{}, `resource name "9lives" is not a name (letters, digits and _, not starting with a digit)`},
		{"named empty", pre + `"resources":{"":1}}`, Resources{}, "is not a name"},
		{"named with =", pre + `"resources":{"a=b":1}}`, Resources{}, "not a name"},
		{"named own key", pre + `"resources":{"cpus":1}}`, Resources{}, `resource cpus has its own key, "cpus"`},
		{"named zero", pre + `"resources":{"licence":0}}`, Resources{}, "at least 1"},
		{"named huge", pre + `"resources":{"licence":4294967296}}`, Resources{}, "more than 2147483647"},
		{"named not int", pre + `"resources":{"licence":"x"}}`, Resources{}, `field "resources" must be int`},
		{"named long", pre + `"resources":{"` + strings.Repeat("a", 65) + `":1}}`, Resources{}, "longer than 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []JobSpec
			err := ReadJobFile(strings.NewReader(c.line), JobSpec{}, func(_ int, js JobSpec) error {
				got = append(got, js)
				return nil
			})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !reflect.DeepEqual(got[0].Resources, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestResourcesWire: a JobSpec marshalled by a Go program is a job-file
// line that means the same; the wire form of memory is bytes.
func TestResourcesWire(t *testing.T) {
	t.Parallel()
	for _, r := range []Resources{
		{},
		{CPUs: 3, Mem: 12345 << 10, GPUs: 2, Named: map[string]int{"lic": 2}},
		{CPUsAuto: true, MemAuto: true},
		{Mem: 1},
	} {
		js := JobSpec{Target: "t", Command: "x", Cwd: "/", Queue: "q", Resources: r}
		b, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		var back JobSpec
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, js) {
			t.Fatalf("%s: decoded %+v, %v", b, back, err)
		}
		var got JobSpec
		if err := ReadJobFile(strings.NewReader(string(b)), JobSpec{}, func(_ int, js JobSpec) error { got = js; return nil }); err != nil {
			t.Fatalf("%s as a job-file line: %v", b, err)
		}
		if !reflect.DeepEqual(got.Resources, r) {
			t.Fatalf("%s as a job-file line: %+v, want %+v", b, got.Resources, r)
		}
	}
	b, _ := json.Marshal(JobSpec{Target: "t", Command: "x", Resources: Resources{Mem: 5}})
	if !strings.Contains(string(b), `"mem_bytes":5`) {
		t.Errorf("wire form %s lacks mem_bytes", b)
	}
	// A job that asks nothing encodes as before.
	b, _ = json.Marshal(JobSpec{Target: "t", Command: "x"})
	if string(b) != `{"target":"t","command":"x"}` {
		t.Errorf("plain job encodes as %s", b)
	}
}

func TestResourcesSetters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set  func(*Resources) error
		want Resources
		err  string
	}{
		{func(r *Resources) error { return r.SetCPUs("4") }, Resources{CPUs: 4}, ""},
		{func(r *Resources) error { return r.SetCPUs("AUTO") }, Resources{CPUsAuto: true}, ""},
		{func(r *Resources) error { return r.SetCPUs("0") }, Resources{}, "at least 1"},
		{func(r *Resources) error { return r.SetCPUs("-2") }, Resources{}, "positive integer"},
		{func(r *Resources) error { return r.SetCPUs("1.5") }, Resources{}, "positive integer"},
		{func(r *Resources) error { return r.SetMem("500M") }, Resources{Mem: 500 << 20}, ""},
		{func(r *Resources) error { return r.SetMem("8X") }, Resources{}, "unknown unit"},
		{func(r *Resources) error { return r.SetMem("1e30") }, Resources{}, "unknown unit"},
		{func(r *Resources) error { return r.SetMem("2000T") }, Resources{}, "more than"},
		{func(r *Resources) error { return r.SetGPUs("2") }, Resources{GPUs: 2}, ""},
		{func(r *Resources) error { return r.SetGPUs("auto") }, Resources{}, "positive integer"},
		{func(r *Resources) error { return r.AddNamed("licence=2") }, Resources{Named: map[string]int{"licence": 2}}, ""},
		{func(r *Resources) error { return r.AddNamed("a-b=2") }, Resources{}, "not a name"},
		{func(r *Resources) error { return r.AddNamed("licence") }, Resources{}, "NAME=N"},
		{func(r *Resources) error { return r.AddNamed("gpus=2") }, Resources{}, "--gpus"},
		{func(r *Resources) error {
			if err := r.AddNamed("x=1"); err != nil {
				return err
			}
			return r.AddNamed("x=2")
		}, Resources{}, "twice"},
	} {
		var r Resources
		err := c.set(&r)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want %q", err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(r, c.want) {
			t.Errorf("got %+v, %v; want %+v", r, err, c.want)
		}
		if err := CheckResources(r); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

func TestResourcesDefaultsAndDescribe(t *testing.T) {
	t.Parallel()
	def := Resources{CPUs: 2, MemAuto: true, GPUs: 1, Named: map[string]int{"lic": 1, "scratch": 10}}
	for _, c := range []struct {
		job, want Resources
		text      string
	}{
		{Resources{}, def, "cpus=2 mem=auto gpus=1 lic=1 scratch=10"},
		{Resources{CPUs: 8, Mem: 1 << 30, Named: map[string]int{"lic": 3}},
			Resources{CPUs: 8, Mem: 1 << 30, GPUs: 1, Named: map[string]int{"lic": 3, "scratch": 10}},
			"cpus=8 mem=1 GiB gpus=1 lic=3 scratch=10"},
		{Resources{CPUsAuto: true}, Resources{CPUsAuto: true, MemAuto: true, GPUs: 1, Named: def.Named}, "cpus=auto mem=auto gpus=1 lic=1 scratch=10"},
	} {
		got := c.job.WithDefaults(def)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v with defaults: %+v, want %+v", c.job, got, c.want)
		}
		if s := got.Describe(); s != c.text {
			t.Errorf("Describe: %q, want %q", s, c.text)
		}
	}
	if (Resources{}).Asks() || !(Resources{GPUs: 1}).Asks() || (Resources{}).Describe() != "" {
		t.Error("the zero request asks for something")
	}
	if got := (Resources{}).WithDefaults(Resources{}); got.Named != nil {
		t.Errorf("no defaults made a map: %+v", got)
	}
}

// FuzzResourceSetters: whatever a person types into --cpus, --mem, --gpus
// or --resource is accepted as a request CheckResources passes, or refused
// in one line.
func FuzzResourceSetters(f *testing.F) {
	for _, s := range []string{"4", "auto", "8G", "1.5g", "500", "0", "-1", "1e30", "8X", "lic=2", "9x=1", "a=b=1", "99999999999999999999T", ".5K", "1.M", "cpus=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, set := range []func(*Resources, string) error{(*Resources).SetCPUs, (*Resources).SetMem, (*Resources).SetGPUs, (*Resources).AddNamed} {
			var r Resources
			err := set(&r, s)
			if err != nil {
				if strings.ContainsAny(err.Error(), "\n\r") {
					t.Fatalf("%q: error %q is not one line", s, err)
				}
				continue
			}
			if cerr := CheckResources(r); cerr != nil {
				t.Fatalf("%q accepted as %+v, which CheckResources refuses: %v", s, r, cerr)
			}
			if !r.Asks() {
				t.Fatalf("%q accepted as the empty request", s)
			}
		}
	})
}

package dc

import "testing"

func TestLinksOf(t *testing.T) {
	conf := map[string]Link{"A": {Latency: 1, Bandwidth: 10}, "bad": {}}
	def := Link{Latency: 2, Bandwidth: 20}
	var ls Links
	for _, tc := range []struct {
		name, site string
		def        Link
		want       Link
	}{
		{"configured", "A", def, conf["A"]},
		{"invalid configured: the default", "bad", def, def},
		{"local: a LAN", LocalSite, Link{}, DefaultLocalLink},
		{"remote, nothing measured: the prior", "B", Link{}, DefaultSiteLink},
	} {
		if got := ls.Of(tc.site, conf, tc.def); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	ls.Measured("A", Link{Latency: 0.5, Bandwidth: 100})
	ls.Measured("C", Link{Latency: 0.1, Bandwidth: 50})
	ls.Measured(LocalSite, Link{Latency: 0.001, Bandwidth: 1e9}) // not a remote site's prior
	ls.Measured("A", Link{})                                     // invalid: ignored
	for _, tc := range []struct {
		name, site string
		want       Link
	}{
		{"measured over configured", "A", Link{Latency: 0.5, Bandwidth: 100}},
		{"unmeasured remote: the best measured", "B", Link{Latency: 0.1, Bandwidth: 100}},
		{"measured local", LocalSite, Link{Latency: 0.001, Bandwidth: 1e9}},
	} {
		if got := ls.Of(tc.site, conf, Link{}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := ls.Of("B", conf, def); got != def {
		t.Errorf("a valid default comes before the best measured: %+v", got)
	}
}

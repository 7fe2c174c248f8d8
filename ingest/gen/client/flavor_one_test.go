package client

import (
	"testing"

	"gendex/store"
)

// TestFlavorIsTheStoresEnum: the client's flavors are store.Flavor's
// values, named by its one naming code, and a server's /v1/models
// "owned_by" is read by the same names as its /metrics prefixes. Before,
// the client kept a copy of the enum (strings) with its own names.
func TestFlavorIsTheStoresEnum(t *testing.T) {
	for f := store.FlavorSGLang; f <= store.FlavorOther; f++ {
		if got := Flavor(f).String(); got != f.String() {
			t.Errorf("flavor %d: the client names it %q, the store %q", f, got, f.String())
		}
		if k := f.Key(); k != "" && flavorOf(k) != Flavor(f) {
			t.Errorf("owned_by %q: flavor %v, want %v", k, flavorOf(k), f)
		}
	}
	if flavorOf("openai") != FlavorUnknown || store.Flavor(FlavorUnknown) != store.FlavorOther {
		t.Errorf("an owned_by gendex does not know: %v, want store.FlavorOther", flavorOf("openai"))
	}
}

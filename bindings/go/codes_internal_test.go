package mcpgw

import (
	"errors"
	"testing"
)

// The generated codes are the linked library's codes (mcpgw_result_codes), value for value and
// name for name, and every failure code has its kind.
func TestGeneratedCodesMatchTheLibrary(t *testing.T) {
	lib := libraryCodes()
	if len(lib) != len(codeNames) {
		t.Errorf("the library has %d codes, the generated list %d", len(lib), len(codeNames))
	}
	for code, name := range lib {
		if codeNames[code] != name {
			t.Errorf("code %d is %q in the library, %q here", code, name, codeNames[code])
		}
		if code != CodeOK && kinds[code] == nil {
			t.Errorf("code %s has no Err value", name)
		}
		if code.String() == "unknown result code" {
			t.Errorf("code %s has no message", name)
		}
	}
	e := &Error{Code: CodeSessionLost}
	if !errors.Is(e, ErrSessionLost) || errors.Is(e, ErrCancelled) || e.Code.Name() != "SESSION_LOST" {
		t.Errorf("ErrSessionLost: %v", e)
	}
}

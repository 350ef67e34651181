package textcheck

import (
	"errors"
	"strings"
	"testing"
)

func TestUTF8(t *testing.T) {
	if err := UTF8("a.txt", []byte("héllo\n世界\n")); err != nil {
		t.Fatalf("valid text refused: %v", err)
	}
	data := []byte("one\ntwo\nab\xffc\n")
	err := UTF8("a.txt", data)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("err = %v", err)
	}
	if e.Line != 3 || e.Col != 3 || e.Offset != 10 || e.Byte != 0xff {
		t.Fatalf("got %+v", *e)
	}
	for _, want := range []string{"a.txt:3:", "column 3", "offset 10", "save the file as UTF-8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// A truncated multi-byte sequence and a surrogate are refused too.
	for _, s := range []string{"x\xe4\xb8", "\xed\xa0\x80", "\xc0\xaf"} {
		if err := UTF8("b", []byte(s)); !errors.Is(err, ErrInvalidUTF8) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestUTF8At(t *testing.T) {
	err := UTF8At("f", []byte("é\xfe"), 7, 100)
	var e *Error
	if !errors.As(err, &e) || e.Line != 7 || e.Col != 3 || e.Offset != 102 {
		t.Fatalf("err = %v (%+v)", err, e)
	}
	u := e.Unlocated()
	if strings.Contains(u.Error(), "f:7") || !errors.Is(u, ErrInvalidUTF8) || !errors.As(u, &e) {
		t.Fatalf("unlocated = %v", u)
	}
}

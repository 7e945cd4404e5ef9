package capture

import (
	"bytes"
	"reflect"
	"testing"
)

func TestLinesCutsAtNewlinesAndKeepsTerminators(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Line
	}{
		{"newline-terminated lines", "a\nbc\n", []Line{{1, []byte("a"), "\n"}, {2, []byte("bc"), "\n"}}},
		{"a CRLF terminator is kept as one", "a\r\nb\n", []Line{{1, []byte("a"), "\r\n"}, {2, []byte("b"), "\n"}}},
		{"a CR inside a line is text", "a\rb\n\r\n", []Line{{1, []byte("a\rb"), "\n"}, {2, []byte{}, "\r\n"}}},
		{"empty lines are lines", "\n\n", []Line{{1, []byte{}, "\n"}, {2, []byte{}, "\n"}}},
		{"a last line without newline is held until Finish", "a\nb", []Line{{1, []byte("a"), "\n"}, {2, []byte("b"), ""}}},
		{"a lone CR at the end is an unterminated line", "a\n\r", []Line{{1, []byte("a"), "\n"}, {2, []byte("\r"), ""}}},
		{"nothing gives nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitLines([]byte(tt.in))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("SplitLines(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			var back []byte
			for _, l := range got {
				back = append(append(back, l.Text...), l.EOL...)
			}
			if !bytes.Equal(back, []byte(tt.in)) {
				t.Fatalf("lines give back %q, want %q", back, tt.in)
			}
		})
	}
}

func TestLinesHoldsATornWriteUntilItsNewline(t *testing.T) {
	var s Lines
	if got := s.Write([]byte(`{"a":`)); got != nil {
		t.Fatalf("a torn write gave lines %+v", got)
	}
	if s.Held() != 5 || s.Offset() != 0 {
		t.Fatalf("Held %d Offset %d, want 5 and 0", s.Held(), s.Offset())
	}
	got := s.Write([]byte("1}\r\n{\"b\""))
	want := []Line{{1, []byte(`{"a":1}`), "\r\n"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Write = %+v, want %+v", got, want)
	}
	if s.Next() != 2 || s.Offset() != 9 || s.Held() != 4 {
		t.Fatalf("Next %d Offset %d Held %d, want 2, 9, 4", s.Next(), s.Offset(), s.Held())
	}
	l, ok := s.Finish()
	if !ok || string(l.Text) != `{"b"` || l.EOL != "" || l.No != 2 {
		t.Fatalf("Finish = %+v %v", l, ok)
	}
	if _, ok := s.Finish(); ok {
		t.Fatal("a second Finish returned a line")
	}
}

func TestNewLinesContinuesAFile(t *testing.T) {
	s := NewLines(7, 100)
	got := s.Write([]byte("x\n"))
	if len(got) != 1 || got[0].No != 7 || s.Offset() != 102 {
		t.Fatalf("lines %+v, offset %d", got, s.Offset())
	}
}

func TestLinesByteByByteEqualsWhole(t *testing.T) {
	in := []byte("{\"a\":1}\r\n\n\r\r\nx\ny")
	var s Lines
	var got []Line
	for i := range in {
		got = append(got, s.Write(in[i:i+1])...)
	}
	if l, ok := s.Finish(); ok {
		got = append(got, l)
	}
	if want := SplitLines(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("byte by byte %+v, whole %+v", got, want)
	}
}

func TestCompleteTakesOnlyAWholeJSONValue(t *testing.T) {
	for in, want := range map[string]bool{
		`{"a":1}`: true, `{"a":1} `: true, `[1,2]`: true,
		`{"a":`: false, `{"a":1}` + "\r": false, `{"a":1}x`: false, "": false,
	} {
		var s Lines
		s.Write([]byte("{}\n" + in))
		l, ok := s.Complete()
		if ok != want {
			t.Errorf("Complete of %q: %v, want %v", in, ok, want)
			continue
		}
		if ok && (string(l.Text) != in || l.EOL != "" || l.No != 2 || s.Held() != 0) {
			t.Errorf("Complete of %q = %+v, held %d", in, l, s.Held())
		}
		if !ok && s.Held() != len(in) {
			t.Errorf("Complete of %q let go of the held bytes", in)
		}
	}
}

func TestLinesLetsGoOfALongLinesBuffer(t *testing.T) {
	var s Lines
	s.Write(bytes.Repeat([]byte("x"), 1<<20))
	if got := s.Write([]byte("\n")); len(got) != 1 || len(got[0].Text) != 1<<20 {
		t.Fatalf("the long line: %d lines", len(got))
	}
	if c := cap(s.tail); c > maxKeptTail {
		t.Fatalf("Lines keeps a %d-byte buffer after a 1 MiB line", c)
	}
}

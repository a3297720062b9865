package spec

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// writeJSON emits the object MarshalJSON defines. The strings are escaped
// as json.Marshal escapes a string, HTML characters included, which is
// what the --json output has always contained. Kept bytes that are not
// UTF-8 (which the string shows with U+FFFD) are also given exactly, in
// base64 (head_base64, tail_base64).
func (s Stream) writeJSON(w *bufio.Writer) {
	w.WriteString(`{"head":`)
	writeJSONString(w, s.Head, true)
	writeBase64(w, `,"head_base64":`, s.Head)
	if len(s.Tail) > 0 {
		w.WriteString(`,"tail":`)
		writeJSONString(w, s.Tail, true)
		writeBase64(w, `,"tail_base64":`, s.Tail)
	}
	w.WriteString(`,"total_bytes":`)
	var num [20]byte
	w.Write(strconv.AppendInt(num[:0], s.Total, 10))
	w.WriteString(`,"truncated":`)
	w.WriteString(strconv.FormatBool(s.Truncated))
	w.WriteByte('}')
}

// writeBase64 writes key and b in base64 when b is not valid UTF-8.
func writeBase64(w *bufio.Writer, key string, b []byte) {
	if utf8.Valid(b) {
		return
	}
	w.WriteString(key)
	w.WriteByte('"')
	enc := base64.NewEncoder(base64.StdEncoding, w)
	enc.Write(b)
	enc.Close()
	w.WriteByte('"')
}

const hexDigits = "0123456789abcdef"

// asciiEscape is how encoding/json writes each ASCII byte that needs
// escaping: the short forms it uses, \u00XX for other control bytes and
// for <, > and & (used only when escaping HTML).
var asciiEscape = func() (t [utf8.RuneSelf]string) {
	for b := range t {
		switch b {
		case '\\', '"':
			t[b] = `\` + string(rune(b))
		case '\b':
			t[b] = `\b`
		case '\f':
			t[b] = `\f`
		case '\n':
			t[b] = `\n`
		case '\r':
			t[b] = `\r`
		case '\t':
			t[b] = `\t`
		default:
			t[b] = `\u00` + string(hexDigits[b>>4]) + string(hexDigits[b&0xf])
		}
	}
	return t
}()

// writeJSONString writes src as a JSON string exactly as encoding/json
// encodes string(src): invalid UTF-8 becomes \ufffd, U+2028 and U+2029
// are escaped, and with escapeHTML so are <, > and &.
func writeJSONString(w *bufio.Writer, src []byte, escapeHTML bool) {
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(src); {
		if b := src[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || (b != '<' && b != '>' && b != '&')) {
				i++
				continue
			}
			if start < i {
				w.Write(src[start:i])
			}
			w.WriteString(asciiEscape[b])
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(src[i:])
		if c == utf8.RuneError && size == 1 {
			w.Write(src[start:i])
			w.WriteString(`\ufffd`)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			w.Write(src[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hexDigits[c&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	w.Write(src[start:])
	w.WriteByte('"')
}

// WriteJSON writes r followed by a newline, byte for byte as a
// json.Encoder with SetEscapeHTML(false) would, but with the output
// streams escaped straight into w (through a buffer) instead of being
// marshalled into memory first: the encoder holds the whole document, six
// times the kept bytes for binary output, and more while its buffers grow.
func (r *CommandResult) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := writeStruct(bw, reflect.ValueOf(r).Elem()); err != nil {
		return err
	}
	bw.WriteByte('\n')
	return bw.Flush()
}

var streamType = reflect.TypeFor[Stream]()

// jsonField is one field of a struct as encoding/json sees it.
type jsonField struct {
	index     int
	key       string // `"name":`
	omitEmpty bool
	stream    bool
}

var fieldCache sync.Map // reflect.Type -> []jsonField, or nil when unsupported

// fieldsOf lists t's JSON fields in encoding order, or returns false when t
// uses a feature this writer does not mirror (embedded fields, the
// ",string" option), so that the caller falls back to encoding/json.
func fieldsOf(t reflect.Type) ([]jsonField, bool) {
	if v, ok := fieldCache.Load(t); ok {
		fs := v.([]jsonField)
		return fs, fs != nil
	}
	var fs []jsonField
	ok := true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			ok = false
			break
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		var omit bool
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty":
				omit = true
			case "":
			default: // ",string", ",omitzero": not mirrored here
				ok = false
			}
		}
		var key bytes.Buffer
		kw := bufio.NewWriter(&key)
		writeJSONString(kw, []byte(name), false)
		kw.WriteByte(':')
		kw.Flush()
		fs = append(fs, jsonField{index: i, key: key.String(), omitEmpty: omit, stream: f.Type == streamType})
	}
	if !ok {
		fs = nil
	}
	fieldCache.Store(t, fs)
	return fs, ok
}

// isEmpty is encoding/json's test for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// writeStruct writes struct v field by field: Stream fields through
// writeJSON, every other field through encoding/json (they are small).
func writeStruct(w *bufio.Writer, v reflect.Value) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	fs, ok := fieldsOf(v.Type())
	if !ok {
		if err := enc.Encode(v.Interface()); err != nil {
			return err
		}
		w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		return nil
	}
	w.WriteByte('{')
	first := true
	for _, f := range fs {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		if !first {
			w.WriteByte(',')
		}
		first = false
		w.WriteString(f.key)
		if f.stream {
			fv.Interface().(Stream).writeJSON(w)
			continue
		}
		buf.Reset()
		if err := enc.Encode(fv.Interface()); err != nil {
			return err
		}
		w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	w.WriteByte('}')
	return nil
}

package protocol

import (
	"encoding/base64"
	"strconv"
)

// FastBulkAdd parses a bulk.add request frame of the shape clients send,
// {"id":N,"op":"bulk.add","body":{"line":N,"data":"BASE64",...}} with the
// body's keys (line, data, queue, cwd) in any order, no whitespace and no
// escapes, without encoding/json, which would validate and copy a frame of
// megabytes twice (the frame, then its body). It reports ok=false for any
// other frame; the caller then uses ParseRequest and decodes the body,
// which gives the result or the error. So for every frame it accepts it
// must agree with that path exactly (FuzzFastBulkAdd checks this).
func FastBulkAdd(b []byte) (id uint64, add BulkAdd, ok bool) {
	const head = `{"id":`
	if len(b) < len(head) || string(b[:len(head)]) != head {
		return 0, add, false
	}
	i := len(head)
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || (b[i] == '0' && j > i+1) {
		return 0, add, false
	}
	id, err := strconv.ParseUint(string(b[i:j]), 10, 64)
	if err != nil {
		return 0, add, false
	}
	const mid = `,"op":"` + bulkAddName + `","body":{`
	if len(b)-j < len(mid) || string(b[j:j+len(mid)]) != mid {
		return 0, add, false
	}
	i = j + len(mid)
	var seen [4]bool
	for first := true; ; first = false {
		if i < len(b) && b[i] == '}' && first {
			break
		}
		key, n, ok := fastString(b, i)
		if !ok || n >= len(b) || b[n] != ':' {
			return 0, add, false
		}
		i = n + 1
		var k int
		switch key {
		case "line":
			k = 0
			j := i
			if j < len(b) && b[j] == '-' {
				j++
			}
			d := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == d || (b[d] == '0' && j > d+1) {
				return 0, add, false
			}
			v, err := strconv.Atoi(string(b[i:j]))
			if err != nil {
				return 0, add, false
			}
			add.Line, i = v, j
		case "data":
			k = 1
			if i >= len(b) || b[i] != '"' {
				return 0, add, false
			}
			j := i + 1
			for j < len(b) && isBase64(b[j]) {
				j++
			}
			if j >= len(b) || b[j] != '"' {
				return 0, add, false
			}
			src := b[i+1 : j]
			data := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
			n, err := base64.StdEncoding.Decode(data, src)
			if err != nil {
				return 0, add, false
			}
			add.Data, i = data[:n], j+1
		case "queue", "cwd":
			k = 2
			if key == "cwd" {
				k = 3
			}
			v, n, ok := fastString(b, i)
			if !ok {
				return 0, add, false
			}
			if key == "queue" {
				add.Queue = v
			} else {
				add.Cwd = v
			}
			i = n
		default:
			return 0, add, false
		}
		if seen[k] { // encoding/json would take the last; leave that to it
			return 0, add, false
		}
		seen[k] = true
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' {
			break
		}
		return 0, add, false
	}
	// b[i] is the body's closing brace; the frame's must follow and end it.
	if i+2 != len(b) || b[i+1] != '}' {
		return 0, add, false
	}
	return id, add, true
}

func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

package protocol

// MaxPeerObjects bounds the JSON objects in one request body from a
// placeholder. Decoded, an object costs far more than its bytes: "{}" is
// 3 bytes of a frame and a Report of about 200, so a 4 MiB frame of empty
// reports held 780 MiB of the CLS's memory, and a placeholder key may have
// 64 such requests in flight. An agent's largest bodies are a register's
// Holding (at most MaxHolding attempts) and a batch of reports, each of
// which is more than 64 bytes, so this is twice what one can need.
const MaxPeerObjects = 2 * MaxHolding

// CheckObjects refuses a body holding more than max JSON objects, before
// it is decoded. It counts the '{' outside strings, in one pass; a body
// that is not JSON is left for the decoder to refuse.
func CheckObjects(body []byte, max int) error {
	if len(body) < 2*(max+1) {
		return nil // each object takes two bytes at least: no scan of the common body
	}
	n, inString := 0, false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case inString && c == '\\':
			i++ // the escaped byte, a quote included
		case c == '"':
			inString = !inString
		case c == '{' && !inString:
			if n++; n > max {
				return Errorf(CodeBadRequest, "the request body holds more than %d JSON objects, the most a placeholder may send", max)
			}
		}
	}
	return nil
}

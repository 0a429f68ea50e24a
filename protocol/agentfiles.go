package protocol

// The agent's own connection as a transfer path (DESIGN.md, "Data
// staging"): the CLS moves files to and from a placeholder's host through
// the connection the agent already has. The agent asks (files.poll, a
// long poll) for what to do; the CLS answers with at most one order, and
// the bytes then go one chunk per request, at most MaxFileChunk each, one
// chunk in flight per transfer: a pull (CLS to agent) or a push (agent to
// CLS). The agent ends each order with files.done, with the size and
// SHA-256 of what it wrote or read.

// MaxFileChunk is the most bytes one files.pull reply or files.push
// request carries.
const MaxFileChunk = 1 << 20

// MaxFileBytes is the largest file size a files.push may announce (1 PiB):
// a size past it is a lie, refused before any byte is taken.
const MaxFileBytes = 1 << 50

// Kinds of FileOrder.
const (
	FileGet    = "get"    // the agent writes Path in its data root, pulling the bytes
	FilePut    = "put"    // the agent reads Path in its data root, pushing the bytes
	FileRemove = "remove" // the agent removes Path from its data root
)

// FilePoll asks for the next file order (long poll up to WaitMS).
type FilePoll struct {
	Placeholder int64 `json:"placeholder"`
	WaitMS      int64 `json:"wait_ms,omitempty"`
}

// FileOrder is one file for the agent to move; Xfer is 0 when none came
// in time.
type FileOrder struct {
	Xfer   int64  `json:"xfer,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Path   string `json:"path,omitempty"` // logical path: DataRoot+Path at the agent
	Size   int64  `json:"size,omitempty"` // -1 = unknown (get)
	SHA256 string `json:"sha256,omitempty"`
}

// FilePull asks for the bytes of a get order from Offset on. Asking again
// for the last offset (a reply lost with the connection) gets the same
// bytes.
type FilePull struct {
	Placeholder int64 `json:"placeholder"`
	Xfer        int64 `json:"xfer"`
	Offset      int64 `json:"offset"`
}

// FileData is a chunk of a get order's bytes; with EOF it is the last,
// and SHA256 is the digest of every byte sent, which the agent checks
// before the file takes its name.
type FileData struct {
	Data   []byte `json:"data,omitempty"`
	EOF    bool   `json:"eof,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// FileChunk is a chunk of a put order's bytes at Offset. The first
// (Offset 0) says the file's Size; the last has EOF.
type FileChunk struct {
	Placeholder int64  `json:"placeholder"`
	Xfer        int64  `json:"xfer"`
	Offset      int64  `json:"offset"`
	Size        int64  `json:"size"`
	Data        []byte `json:"data,omitempty"`
	EOF         bool   `json:"eof,omitempty"`
}

// FileDone ends an order: what the agent wrote (get) or read (put), or
// Error.
type FileDone struct {
	Placeholder int64  `json:"placeholder"`
	Xfer        int64  `json:"xfer"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256,omitempty"`
	Error       string `json:"error,omitempty"`
	Missing     bool   `json:"missing,omitempty"` // Error is: the file does not exist
	// NoSpace: Error is the host's disk (or quota) full where the file
	// was being written, the place's transient fault.
	NoSpace bool `json:"no_space,omitempty"`
}

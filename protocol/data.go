package protocol

// Data staging (DESIGN.md, "Data staging"): the catalog of the files jobs
// declare, the places holding a replica of each, and the transfers the
// CLS makes between places.

// Data ops. Copying a file back to the CLS host (files.get) and dropping
// replicas (files.rm) act with the CLS owner's rights, as every job does:
// the user role, which may already run any command as the owner.
var (
	OpFilesList = op[FilesQuery, FilesReply](Spec{Name: "files.list", Role: RoleUser,
		Doc: "lists the catalog: files with their size, checksum and replicas (paged by path)"})
	OpFilesGet = op[FilesGet, TransferInfo](Spec{Name: "files.get", Role: RoleUser,
		Doc: "copies a file from a place holding it to the CLS host, verified"})
	OpFilesAdd = op[FilesAdd, CatalogFile](Spec{Name: "files.add", Role: RoleUser, Durable: true,
		Doc: "registers a file that already exists at a site (the CLS measures and hashes it there)"})
	OpFilesRemove = op[FilesRemove, CatalogFile](Spec{Name: "files.rm", Role: RoleUser, Durable: true,
		Doc: "drops a file's replicas at one place or all (the last one only with force)"})
)

// MaxSHA256Bytes is the length of a SHA-256 in hex.
const MaxSHA256Bytes = 64

// FileSum is a file as an agent saw it made: reported with a job's end
// for each declared output it created.
type FileSum struct {
	Path   string `json:"path"` // as declared (absolute, the CLS host's name)
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// AssignedFile is a declared file as an assignment carries it to the
// agent. A Local file was declared with an absolute path: it is the
// site's own, never moved, only looked for.
type AssignedFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`             // -1 = unknown
	SHA256 string `json:"sha256,omitempty"` // of the replica staged for this job, when known
	Local  bool   `json:"local,omitempty"`
}

// Replica is one place holding a copy of a file. Host is set at sites
// whose nodes share no filesystem (the CLS host's site, local, is one).
type Replica struct {
	Site   string `json:"site"`
	Host   string `json:"host,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Made   string `json:"made,omitempty"` // RFC 3339
}

// CatalogFile is one file of the catalog.
type CatalogFile struct {
	Path     string    `json:"path"`
	Size     *int64    `json:"size,omitempty"`
	SHA256   string    `json:"sha256,omitempty"`
	Producer int64     `json:"producer,omitempty"` // the job that made it, 0 = a user's file
	Replicas []Replica `json:"replicas"`
}

// FilesQuery pages through the catalog in path order: files whose path
// starts with Prefix and sorts after After, at most Limit (0 = 1,000).
type FilesQuery struct {
	Prefix string `json:"prefix,omitempty"`
	After  string `json:"after,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// FilesReply is a page of the catalog; More says another follows (ask
// again with After set to the last path).
type FilesReply struct {
	Files []CatalogFile `json:"files"`
	More  bool          `json:"more,omitempty"`
}

// FilesGet copies Path from Site (or the place the CLS finds best) to
// Dest on the CLS host ("" = Path itself).
type FilesGet struct {
	Path string `json:"path"`
	Site string `json:"site,omitempty"`
	Dest string `json:"dest,omitempty"`
}

// FilesAdd registers Path as present at Site (and Host, for the local
// site).
type FilesAdd struct {
	Path string `json:"path"`
	Site string `json:"site"`
	Host string `json:"host,omitempty"`
}

// FilesRemove drops Path's replica at Site ("" = at every place). The
// last replica of a file that live jobs still read goes only with Force.
type FilesRemove struct {
	Path  string `json:"path"`
	Site  string `json:"site,omitempty"`
	Force bool   `json:"force,omitempty"`
}

// TransferInfo is one copy of a file between places, for a job (Job > 0)
// or a user's files.get.
type TransferInfo struct {
	Job     int64   `json:"job,omitempty"`
	Path    string  `json:"path"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Started string  `json:"started"` // RFC 3339
	Error   string  `json:"error,omitempty"`
	// Via is the path taken at each end, "SRC>DST": fs (the CLS host's
	// filesystem), sftp (a site's login host) or agent (a placeholder's
	// own connection); "" when not recorded.
	Via string `json:"via,omitempty"`
}

// MovedTotals sums the transfers made, for mqstat --summary.
type MovedTotals struct {
	Transfers int     `json:"transfers"`
	Failed    int     `json:"failed"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
}

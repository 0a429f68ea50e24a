package metaqueue

import "github.com/mq-hpc/mq/internal/metaqueue/observe"

// Observer is told what the core does, for metrics (package observe).
type Observer = observe.Observer

package web

import (
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
)

// dagSVG is a target's prerequisite graph laid out in columns by depth:
// the target on the left, its prerequisites to the right.
type dagSVG struct {
	W, H  int
	Nodes []dagNode
	Edges []dagEdge
}

type dagNode struct {
	X, Y             int
	Name, Label      string
	Class            string // complete, bad, pending, empty
	Total, Done, Bad int
}

type dagEdge struct{ X1, Y1, X2, Y2 int }

const (
	nodeW, nodeH = 180, 40
	colGap       = 60
	rowGap       = 14
)

func layoutDAG(nodes []inspect.TargetNode) dagSVG {
	var g dagSVG
	rows := map[int]int{} // depth -> nodes placed
	pos := make([][2]int, len(nodes))
	for i, n := range nodes {
		r := rows[n.Depth]
		rows[n.Depth]++
		x := 10 + n.Depth*(nodeW+colGap)
		y := 10 + r*(nodeH+rowGap)
		pos[i] = [2]int{x, y}
		class := "pending"
		switch {
		case n.Total == 0:
			class = "empty"
		case n.Bad > 0:
			class = "bad"
		case n.Done == n.Total:
			class = "complete"
		}
		label := n.Name
		if len([]rune(label)) > 22 {
			label = string([]rune(label)[:21]) + "…"
		}
		g.Nodes = append(g.Nodes, dagNode{X: x, Y: y, Name: n.Name, Label: label, Class: class, Total: n.Total, Done: n.Done, Bad: n.Bad})
		g.W = max(g.W, x+nodeW+10)
		g.H = max(g.H, y+nodeH+10)
	}
	for i, n := range nodes {
		for _, p := range n.Prereqs {
			g.Edges = append(g.Edges, dagEdge{X1: pos[i][0] + nodeW, Y1: pos[i][1] + nodeH/2, X2: pos[p][0], Y2: pos[p][1] + nodeH/2})
		}
	}
	return g
}

package state

// PlanSlot is a node of a gang's placement plan and how many of the
// members still needed it takes.
type PlanSlot struct {
	Node    string
	Members int
}

// SetPlan records where the attempt's first-fit check put the members
// still needed, in the order it filled the nodes.
func (g *Gang) SetPlan(plan []PlanSlot) {
	g.plan, g.planFailed = plan, false
}

// PlanWindow returns up to n planned nodes that still take a member, in
// plan order; nil without a usable plan. Steering a member to these nodes
// instead of every node makes its cycle cost O(n) rather than O(nodes):
// for a gang of a thousand members that is most of its placing time.
func (g *Gang) PlanWindow(n int) []string {
	if g.planFailed {
		return nil
	}
	var window []string
	for _, slot := range g.plan {
		if slot.Members > 0 {
			window = append(window, slot.Node)
			if len(window) == n {
				break
			}
		}
	}
	return window
}

// TakePlanSlot records a member reserved on node.
func (g *Gang) TakePlanSlot(node string) {
	for i := range g.plan {
		if g.plan[i].Node == node && g.plan[i].Members > 0 {
			g.plan[i].Members--
			return
		}
	}
}

// AbandonPlan makes the rest of the attempt place over every node: a
// member found no room among the planned ones (its constraints differ from
// what the first-fit check sees, which is resources only).
func (g *Gang) AbandonPlan() { g.planFailed = true }

package report

import (
	"regexp"
	"strings"
)

// axisTwin is two scenario groups alike but for one axis of the sweep: ref has the axis's
// reference value (no CPU tier, an aggregated fleet), alt another value. The CPU tier and
// P/D sections are both built on it.
type axisTwin struct {
	base     string // the group name without the axis
	value    string // alt's value of the axis
	ref, alt *groupPlan
}

// axisKey matches one axis in a group name ("x gpu=L4,kv_offloading_size=64"): the axis's
// short name (its path's last element, as sweep names groups) and its value.
func axisKey(short string) *regexp.Regexp {
	return regexp.MustCompile(`,?` + regexp.QuoteMeta(short) + `=([^,\s]+)`)
}

// axisTwins finds, in plan order, each group whose name gives the axis a value other than
// ref, with its twin that gives it ref.
func axisTwins(plan []groupPlan, key *regexp.Regexp, ref string) []axisTwin {
	refs := map[string]*groupPlan{}
	for i := range plan {
		if m := key.FindStringSubmatch(plan[i].name); m != nil && m[1] == ref {
			refs[axisBase(key, plan[i].name)] = &plan[i]
		}
	}
	var out []axisTwin
	for i := range plan {
		m := key.FindStringSubmatch(plan[i].name)
		base := axisBase(key, plan[i].name)
		if m == nil || m[1] == ref || refs[base] == nil {
			continue
		}
		out = append(out, axisTwin{base: base, value: m[1], ref: refs[base], alt: &plan[i]})
	}
	return out
}

// axisBase is a group name without the axis.
func axisBase(key *regexp.Regexp, name string) string {
	return strings.TrimSpace(strings.Replace(key.ReplaceAllString(name, ""), " ,", " ", 1))
}

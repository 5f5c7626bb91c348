package table_test

import (
	"fmt"

	"kvroute/internal/table"
)

func ExampleMap() {
	var m table.Map[int32] // block hash → slot of a slab
	m.Set(0x9e3779b97f4a7c15, 7)
	m.Set(42, 3)
	if p := m.Find(42); p != nil {
		*p++ // a pointer into the table, valid until the next insertion or deletion
	}
	v, ok := m.Get(42)
	fmt.Println(v, ok, m.Len())
	m.Delete(42)
	_, ok = m.Get(42)
	fmt.Println(ok, m.Len())
	// Output:
	// 4 true 2
	// false 1
}

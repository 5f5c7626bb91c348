package tokenize_test

import (
	"fmt"

	"kvroute/router/tokenize"
)

func Example() {
	for _, name := range []string{tokenize.NameCharacter, tokenize.NameTiktoken} {
		tok, err := tokenize.New(name)
		if err != nil {
			fmt.Println(err)
			return
		}
		b, err := tok.AppendBytes(nil, "hello world")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: % x\n", tok.Name(), b)
	}
	fmt.Printf("tokens: % x\n", tokenize.AppendTokenBytes(nil, []int32{15339, 1917}))
	// Output:
	// character: 68 65 6c 6c 6f 20 77 6f 72 6c 64
	// tiktoken: 00 00 3b eb 00 00 07 7d
	// tokens: 00 00 3b eb 00 00 07 7d
}

func ExampleTiktoken_Count() {
	tk, err := tokenize.NewTiktoken()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tk.Count("tiktoken is great!"), tk.Encode("hello world"))
	// Output: 6 [15339 1917]
}

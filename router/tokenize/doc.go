// Package tokenize turns prompts into the byte stream that prefix block
// hashing consumes, as AIBrix's prefix-cache router does.
//
//   - "character" (AIBrix's default) emits the UTF-8 bytes of the text.
//   - "tiktoken" encodes the text with OpenAI's cl100k_base BPE and emits
//     each token id as 4 big-endian bytes, so a block of 16 bytes is 4
//     tokens.
//
// AppendTokenBytes emits the same 4-byte encoding for requests that already
// carry token ids.
//
// The cl100k_base ranks are compiled into the binary (tiktoken-go-loader's
// offline loader), so nothing is downloaded at run time. Selecting that
// loader is process-wide: the first use of the tiktoken tokenizer calls
// tiktoken.SetBpeLoader once, which also affects any other tiktoken-go user
// in the process. The encoder is built once (about 150 ms and 11 MB of heap
// on a server CPU) and shared by every Tiktoken value; it is safe for
// concurrent use. Encoding is slow: about 10 ms for 32k characters, so
// token-based prefix routing costs far more than the character tokenizer.
package tokenize

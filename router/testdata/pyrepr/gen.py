# Writes caseN.json and caseN.txt = str((json.loads(body),)) as CPython renders it, the
# expected output of router.appendPyPayload. Run: python3 gen.py . (from this directory).
import json,sys,os
cases = [
 '{"model":"m","prompt":"hello","max_tokens":16}',
 '{"model": "llama", "prompt": "it\'s a \\"quote\\"", "stream": true, "temperature": 0.7, "stop": null}',
 '{"prompt":"tab\\there\\nnew\\r\\\\ back \\u0001 \\u007f \\u00e9 \\u00a0 \\u2028 \\u4e2d \\ud83d\\ude00 \\u200b","n":-0,"x":1e16,"y":1.5e-5,"z":100.0,"w":123456789012345678901234567890,"v":1E2,"u":0.0001,"t":-2.5e-300,"s":1e400,"r":-0.0}',
 '{"a":1,"b":[1,2,{"c":[]}],"a":3,"d":{},"e":false,"f":"only \'single\'","g":"both \' and \\""}',
 '{"model":"m","messages":[{"role":"assistant","content":"hi"}],"max_tokens":8}',
 '{"prompt":["a","b"],"logit_bias":{"50256":-100},"seed":42,"top_p":1,"presence_penalty":0.30000000000000004}',
 # a dict large enough for the position map, duplicates before and after it starts
 '{' + ','.join('"k%d":%d' % (i % 23, i) for i in range(40)) + ',"k3":"last","k22":null}',
]
d=sys.argv[1]
for i,c in enumerate(cases):
    open(os.path.join(d,f"case{i}.json"),"w").write(c)
    open(os.path.join(d,f"case{i}.txt"),"w").write(str((json.loads(c),)))

# Computes the endpoint Neutree v1.1.1's CHWBL picks for a request when every load is 0 (the
# first replica on the ring from the key's MD5), with CPython's own str() and hashlib: the
# expected endpoints of the "str(payload)" cases in chwbl.json. Run: python3 neutree_oracle.py
import bisect, hashlib, json

def md5_prefix(s):
    return int(hashlib.md5(s.encode()).hexdigest()[:16], 16)

def pick(endpoints, key, vnodes=100):
    ring = {md5_prefix(f"{e}:{i}"): e for e in endpoints for i in range(vnodes)}
    points = sorted(ring)
    i = bisect.bisect_left(points, md5_prefix(key))
    return ring[points[i if i < len(points) else 0]]

eps = ["e0", "e1", "e2", "e3"]
prompt = "Summarize the plot of Hamlet in two sentences."
for n in (3, 4):  # simulation: the body is {model, prompt, max_tokens}
    print("max_tokens", n, pick(eps, str(({"model": "m", "prompt": prompt, "max_tokens": n},))))
for t in ("0.5", "1.0", "1"):  # live: the client's body as json.loads reads it
    body = '{"model":"m","prompt":"%s","max_tokens":16,"temperature":%s}' % (prompt, t)
    print("temperature", t, pick(eps, str((json.loads(body),))))

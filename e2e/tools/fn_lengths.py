#!/usr/bin/env python3
"""Lists non-test Rust functions longer than N lines: `python3 e2e/tools/fn_lengths.py crates/controller/src 100`.

Brace counting over text (good enough for this codebase: no braces in strings at a
function's first line); a file's `#[cfg(test)]` module and what follows it are skipped."""
import os
import re
import sys


def scan(path):
    src=open(path).read().split('\n')
    # cut test module
    out=[]
    i=0
    in_test=False
    for idx,l in enumerate(src):
        if re.match(r'\s*#\[cfg\(test\)\]',l): 
            break
        m=re.match(r'\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?fn\s+(\w+)',l)
        if m:
            # count until brace depth returns
            depth=0; started=False; j=idx
            while j<len(src):
                for ch in src[j]:
                    if ch=='{': depth+=1; started=True
                    elif ch=='}': depth-=1
                if started and depth<=0: break
                if not started and src[j].rstrip().endswith(';'): break
                j+=1
            n=j-idx+1
            if n>int(sys.argv[2]): out.append((n,path,idx+1,m.group(5)))
    return out
res=[]
for root,_,files in os.walk(sys.argv[1]):
    for f in files:
        if f.endswith('.rs'): res+=scan(os.path.join(root,f))
for r in sorted(res,reverse=True): print(*r)

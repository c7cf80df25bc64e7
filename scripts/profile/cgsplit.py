#!/usr/bin/env python3
"""Split a callgrind profile (Ir) into components: self cost by (function, inlined source file),
plus inclusive cost of call edges into 'root' functions of a component from outside it."""
import re, sys, collections
path = sys.argv[1]
names = {'fl': {}, 'fn': {}}
def name(kind, s):
    m = re.match(r'\((\d+)\)(?: (.*))?', s)
    if not m: return s
    i, n = m.groups()
    d = names['fn' if kind == 'fn' else 'fl']
    if n is not None: d[i] = n
    return d[i]
selfc = collections.Counter()        # (fn, file) -> Ir
edges = collections.Counter()        # (caller fn, callee fn) -> inclusive Ir
fn = fl = fi = None; cfn = None; pending = False; total = 0
for line in open(path):
    line = line.rstrip('\n')
    if not line or line[0] == '#': continue
    if line.startswith('fl='): fl = fi = name('fl', line[3:]); continue
    if line.startswith(('fi=', 'fe=')): fi = name('fl', line[3:]); continue
    if line.startswith('fn='): fn = name('fn', line[3:]); fi = fl; continue
    if line.startswith(('cfl=', 'cfi=', 'cob=', 'ob=')):
        if line.startswith(('cfl','cfi')): name('fl', line[4:])
        continue
    if line.startswith('cfn='): cfn = name('fn', line[4:]); continue
    if line.startswith('calls='): pending = True; continue
    if line[0] in '0123456789+-*':
        parts = line.split()
        c = int(parts[1]) if len(parts) > 1 else 0
        if pending: edges[(fn, cfn)] += c; pending = False
        else: selfc[(fn, fi)] += c; total += c
        continue
import json
json.dump({'total': total, 'self': [[a, b, c] for (a, b), c in selfc.items()],
           'edges': [[a, b, c] for (a, b), c in edges.items()]}, open(sys.argv[2], 'w'))
print('total', total)

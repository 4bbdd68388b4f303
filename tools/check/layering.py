#!/usr/bin/env python3
"""The layering rules of src/ (STYLE.md, issue 23), one check per argument:
  includes  only src/comm includes <mpi.h>, only src/ocl includes OpenCL or CLBlast headers
  cycles    the include graph between src/ folders has no cycle
  pure LIB  the pure core's static library refers to no MPI, OpenCL or CLBlast symbol (nm -u)
  sizes     no function over 100 lines and no file over 800 lines in src/
Prints what breaks a rule and exits 1, else exits 0. Run from the repository root."""
import glob, os, re, subprocess, sys

SRC = 'src'
FN_MAX, FILE_MAX = 100, 800


def sources(exts=('.c', '.h', '.cpp')):
    for p in sorted(glob.glob(SRC + '/**/*', recursive=True)):
        if p.endswith(exts):
            yield p


def folder(p):
    parts = os.path.relpath(p, SRC).split(os.sep)
    return parts[0] if len(parts) > 1 else ''


def includes():
    bad = []
    for p in sources():
        for n, line in enumerate(open(p, errors='replace'), 1):
            m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
            if not m:
                continue
            h = m.group(1)
            if h == 'mpi.h' and folder(p) != 'comm':
                bad.append(f'{p}:{n}: includes <mpi.h> outside src/comm')
            if (h.startswith(('CL/', 'OpenCL/')) or 'clblast' in h.lower()) and folder(p) != 'ocl':
                bad.append(f'{p}:{n}: includes {h} outside src/ocl')
    return bad


def cycles():
    edges = {}
    for p in sources():
        f = folder(p)
        for n, line in enumerate(open(p, errors='replace'), 1):
            m = re.match(r'\s*#\s*include\s*"([a-z_0-9]+)/[^"]+"', line)
            if m and f and m.group(1) != f:
                edges.setdefault(f, {}).setdefault(m.group(1), f'{p}:{n}')
    # the strongly connected folders: each group of more than one is a cycle
    nodes = sorted(set(edges) | {b for a in edges for b in edges[a]})
    reach = {a: {a} for a in nodes}
    for a in nodes:
        todo = [a]
        while todo:
            for c in edges.get(todo.pop(), {}):
                if c not in reach[a]:
                    reach[a].add(c)
                    todo.append(c)
    bad, seen = [], set()
    for a in nodes:
        group = sorted(b for b in nodes if b in reach[a] and a in reach[b])
        if len(group) > 1 and group[0] not in seen:
            seen.update(group)
            where = [f'{x} -> {y} at {edges[x][y]}' for x in group for y in group
                     if y in edges.get(x, {})]
            bad.append('include cycle between ' + ', '.join(group) + ': ' + '; '.join(where))
    return bad


def pure(lib):
    if not os.path.exists(lib):
        return [f'{lib}: not built']
    out = subprocess.run(['nm', '-u', '-A', lib], capture_output=True, text=True, check=True).stdout
    bad = []
    for line in out.splitlines():
        sym = line.split()[-1]
        if re.match(r'(MPI_|PMPI_|ompi_|cl[A-Z]|CLBlast|_ZN7clblast)', sym):
            bad.append(f'{line.split(":")[1]}: refers to {sym}')
    return bad


def sizes():
    bad = []
    for p in sources(('.c', '.h', '.cpp')):
        lines = open(p, errors='replace').read().split('\n')
        if len(lines) - 1 > FILE_MAX:
            bad.append(f'{p}: {len(lines) - 1} lines (at most {FILE_MAX})')
        i = 0
        while i < len(lines):  # a definition starts at column 0 and ends at a '}' there
            if re.match(r'[A-Za-z_][^;]*\(', lines[i]) and not lines[i].startswith('#'):
                j = i
                while j < len(lines) and '{' not in lines[j] and not lines[j].rstrip().endswith(';'):
                    j += 1
                if j < len(lines) and lines[j].rstrip().endswith('{'):
                    k = j
                    while k < len(lines) and not lines[k].startswith('}'):
                        k += 1
                    if k - i + 1 > FN_MAX:
                        bad.append(f'{p}:{i + 1}: {lines[i].strip()[:60]}... {k - i + 1} lines '
                                   f'(at most {FN_MAX})')
                    i = k
            i += 1
    return bad


def main(argv):
    what = argv[1] if len(argv) > 1 else ''
    if what == 'includes':
        bad = includes()
    elif what == 'cycles':
        bad = cycles()
    elif what == 'pure' and len(argv) == 3:
        bad = pure(argv[2])
    elif what == 'sizes':
        bad = sizes()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

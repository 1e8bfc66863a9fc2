#!/usr/bin/env python3
"""Check the terminal corpus in this directory.

For every manifest entry:
  * NAME.timing is classic "delay bytes" lines and its byte column sums to the
    size of NAME.raw;
  * NAME.raw has no `script` header/footer ("Script started on" / "Script done on");
  * replaying NAME.raw through a small VT100-ish screen model, chunk by chunk,
    the text left of the cursor at every quiet gap longer than GAP seconds
    (trailing spaces trimmed) equals the manifest "prompts" list, in order
    (only for entries with "interactive": true).

Usage: python3 verify.py [-v] [--gap SECONDS]
Exit status is non-zero if any check fails.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class Screen:
    """Just enough of a terminal to know what sits left of the cursor."""

    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols
        self.main = self._blank()
        self.alt = self._blank()
        self.buf = self.main
        self.y = self.x = 0
        self.saved = (0, 0)
        self.top, self.bot = 0, rows - 1
        self.wrap_pending = False
        self.state = "ground"
        self.params = ""
        self.utf8 = b""

    def _blank(self):
        return [[" "] * self.cols for _ in range(self.rows)]

    # -- helpers ---------------------------------------------------------
    def _scroll_up(self, n=1):
        for _ in range(n):
            del self.buf[self.top]
            self.buf.insert(self.bot, [" "] * self.cols)

    def _scroll_down(self, n=1):
        for _ in range(n):
            del self.buf[self.bot]
            self.buf.insert(self.top, [" "] * self.cols)

    def _lf(self):
        if self.y == self.bot:
            self._scroll_up()
        elif self.y < self.rows - 1:
            self.y += 1

    def _put(self, ch):
        if self.wrap_pending:
            self.x = 0
            self._lf()
            self.wrap_pending = False
        self.buf[self.y][self.x] = ch
        if self.x == self.cols - 1:
            self.wrap_pending = True
        else:
            self.x += 1

    def _clamp(self):
        self.y = max(0, min(self.rows - 1, self.y))
        self.x = max(0, min(self.cols - 1, self.x))
        self.wrap_pending = False

    def before_cursor(self):
        return "".join(self.buf[self.y][: self.x]).rstrip()

    # -- input -----------------------------------------------------------
    def feed(self, data):
        for b in data:
            self._byte(b)

    def _byte(self, b):
        st = self.state
        if st == "osc":
            if b == 0x07:
                self.state = "ground"
            elif b == 0x1B:
                self.state = "osc_esc"
            return
        if st == "osc_esc":
            self.state = "ground" if b == 0x5C else "osc"
            return
        if st == "esc":
            self._esc(b)
            return
        if st == "esc_skip":  # ESC ( B, ESC # 8 and the like: one more byte
            self.state = "ground"
            return
        if st == "csi":
            if 0x20 <= b <= 0x3F:
                self.params += chr(b)
            else:
                self.state = "ground"
                self._csi(chr(b), self.params)
            return
        # ground
        if self.utf8:
            self.utf8 += bytes([b])
            need = 2 if self.utf8[0] >= 0xC0 else 1
            need = 3 if self.utf8[0] >= 0xE0 else need
            need = 4 if self.utf8[0] >= 0xF0 else need
            if len(self.utf8) >= need:
                self._put(self.utf8.decode("utf-8", "replace"))
                self.utf8 = b""
            return
        if b == 0x1B:
            self.state = "esc"
        elif b == 0x0D:
            self.x = 0
            self.wrap_pending = False
        elif b in (0x0A, 0x0B, 0x0C):
            self._lf()
            self.wrap_pending = False
        elif b == 0x08:
            if self.x > 0:
                self.x -= 1
            self.wrap_pending = False
        elif b == 0x09:
            self.x = min(self.cols - 1, (self.x // 8 + 1) * 8)
        elif b < 0x20 or b == 0x7F:
            pass
        elif b >= 0xC0:
            self.utf8 = bytes([b])
        elif b >= 0x80:
            pass
        else:
            self._put(chr(b))

    def _esc(self, b):
        self.state = "ground"
        c = chr(b)
        if c == "[":
            self.state, self.params = "csi", ""
        elif c == "]":
            self.state = "osc"
        elif c in "()*+#%":
            self.state = "esc_skip"
        elif c == "7":
            self.saved = (self.y, self.x)
        elif c == "8":
            self.y, self.x = self.saved
            self._clamp()
        elif c == "M":
            if self.y == self.top:
                self._scroll_down()
            elif self.y > 0:
                self.y -= 1
        elif c == "D":
            self._lf()
        elif c == "E":
            self.x = 0
            self._lf()
        elif c == "c":
            self.__init__(self.rows, self.cols)

    def _csi(self, final, params):
        private = params[:1] in ("?", ">", "<", "=")
        body = params[1:] if private else params
        try:
            args = [int(p) if p else 0 for p in body.split(";")] if body else []
        except ValueError:
            args = []
        a = args[0] if args else 0
        n = a or 1
        if private:
            if final in "hl" and params.startswith("?"):
                for p in args:
                    if p in (47, 1047, 1049):
                        want = self.alt if final == "h" else self.main
                        if final == "h" and self.buf is not self.alt:
                            if p == 1049:
                                self.saved = (self.y, self.x)
                            self.alt = self._blank()
                        self.buf = want
                        if final == "l" and p == 1049:
                            self.y, self.x = self.saved
            return
        if final == "A":
            self.y = max(self.top if self.y >= self.top else 0, self.y - n)
        elif final == "B":
            self.y = min(self.bot if self.y <= self.bot else self.rows - 1, self.y + n)
        elif final in "Ca":
            self.x += n
        elif final == "D":
            self.x -= n
        elif final == "E":
            self.y, self.x = self.y + n, 0
        elif final == "F":
            self.y, self.x = self.y - n, 0
        elif final in "G`":
            self.x = n - 1
        elif final == "d":
            self.y = n - 1
        elif final in "Hf":
            r = args[0] if len(args) > 0 and args[0] else 1
            c = args[1] if len(args) > 1 and args[1] else 1
            self.y, self.x = r - 1, c - 1
        elif final == "K":
            row = self.buf[self.y]
            if a == 0:
                rng = range(self.x, self.cols)
            elif a == 1:
                rng = range(0, self.x + 1)
            else:
                rng = range(self.cols)
            for i in rng:
                row[i] = " "
            return
        elif final == "J":
            if a == 0:
                for i in range(self.x, self.cols):
                    self.buf[self.y][i] = " "
                rows = range(self.y + 1, self.rows)
            elif a == 1:
                for i in range(0, self.x + 1):
                    self.buf[self.y][i] = " "
                rows = range(0, self.y)
            else:
                rows = range(self.rows)
            for r in rows:
                self.buf[r] = [" "] * self.cols
            return
        elif final == "r":
            t = args[0] if len(args) > 0 and args[0] else 1
            btm = args[1] if len(args) > 1 and args[1] else self.rows
            self.top, self.bot = t - 1, min(self.rows, btm) - 1
            self.y = self.x = 0
        elif final == "L":
            if self.top <= self.y <= self.bot:
                for _ in range(n):
                    del self.buf[self.bot]
                    self.buf.insert(self.y, [" "] * self.cols)
        elif final == "M":
            if self.top <= self.y <= self.bot:
                for _ in range(n):
                    del self.buf[self.y]
                    self.buf.insert(self.bot, [" "] * self.cols)
        elif final == "P":
            row = self.buf[self.y]
            del row[self.x : self.x + n]
            row.extend([" "] * (self.cols - len(row)))
        elif final == "@":
            row = self.buf[self.y]
            for _ in range(n):
                row.insert(self.x, " ")
            del row[self.cols :]
        elif final == "X":
            for i in range(self.x, min(self.cols, self.x + n)):
                self.buf[self.y][i] = " "
            return
        elif final == "S":
            self._scroll_up(n)
        elif final == "T":
            self._scroll_down(n)
        elif final == "s":
            self.saved = (self.y, self.x)
        elif final == "u":
            self.y, self.x = self.saved
        else:
            return  # m, h, l, n, t, c, q ... do not move the cursor
        self._clamp()


def read_timing(path):
    out = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 2:
                raise ValueError(f"{path}:{ln}: expected 'delay bytes', got {line!r}")
            out.append((float(parts[0]), int(parts[1])))
    return out


def prompts_at_gaps(raw, timing, rows, cols, gap):
    scr = Screen(rows, cols)
    found, pos = [], 0
    for i, (delay, n) in enumerate(timing):
        if i > 0 and delay > gap:
            found.append(scr.before_cursor())
        scr.feed(raw[pos : pos + n])
        pos += n
    return found


def main():
    verbose = "-v" in sys.argv
    gap = 1.0
    if "--gap" in sys.argv:
        gap = float(sys.argv[sys.argv.index("--gap") + 1])
    manifest = json.load(open(os.path.join(HERE, "manifest.json")))
    bad = 0
    total = 0
    for e in manifest:
        name = e["name"]
        raw = open(os.path.join(HERE, name + ".raw"), "rb").read()
        timing = read_timing(os.path.join(HERE, name + ".timing"))
        total += len(raw)
        s = sum(n for _, n in timing)
        errs = []
        if s != len(raw):
            errs.append(f"timing sum {s} != raw size {len(raw)}")
        if b"Script started on" in raw or b"Script done on" in raw:
            errs.append("script header/footer present")
        got = prompts_at_gaps(raw, timing, e["rows"], e["cols"], gap)
        if e["interactive"] and got != e["prompts"]:
            errs.append(f"prompts at gaps {got!r} != manifest {e['prompts']!r}")
        status = "FAIL " + "; ".join(errs) if errs else "ok"
        bad += bool(errs)
        if verbose or errs:
            print(f"{name:28} {len(raw):8} bytes {len(timing):6} chunks  {status}")
            if verbose and got:
                print(f"{'':28} quiet-gap lines: {got!r}")
    print(f"{len(manifest)} sessions, {total} raw bytes, {bad} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

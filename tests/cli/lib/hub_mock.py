#!/usr/bin/env python3
"""A mock of the Hugging Face hub on 127.0.0.1, for the hub client's tests (tests/cli/hub*.sh).

It serves the endpoints qhx and huggingface_hub use:
  GET  /api/models/ORG/NAME/revision/REV        {"id", "sha", "siblings": [{"rfilename"}]}
  GET  /api/models/ORG/NAME/tree/REV[/PATH]     [{"type", "path", "size", "oid", "lfs": {"oid", "size"}}]
  HEAD/GET /ORG/NAME/resolve/REV/FILE           a small file: 200, ETag (git blob id), X-Repo-Commit;
                                                an LFS file: 302 to the storage host (a second
                                                server on another port) with X-Linked-Etag
                                                (sha256), X-Linked-Size, X-Repo-Commit
  HEAD/GET (storage) /lfs/SHA256                the bytes, with Range (206) support
Errors carry X-Error-Code as the hub's do (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo).
The storage host answers 400 to any request that carries an Authorization header (a token must
never follow a redirect to another host) and records it.

Faults on request (GET /_mock/fault?match=SUBSTRING&kind=KIND&times=N[&after=B][&code=C][&retry_after=S][&rate=R]):
  close      send `after` bytes of the body, then close the connection
  badhash    send the body with one byte changed
  status     answer HTTP `code` (401, 403, 404, 429 with Retry-After `retry_after`, 500 ...)
  trickle    send the body at `rate` bytes per second
  long       send the body with 1000 bytes more than its size (Content-Length too)
  unsafe     (on a tree listing) add a file whose path climbs out of the folder ("../escape")
  loop       (on a resolve) redirect to the same URL, forever
each for the next N requests whose path holds SUBSTRING. GET /_mock/log: the requests so far (text
lines "HOST METHOD PATH AUTH RANGE": HOST hub or storage, AUTH "auth" or "-", RANGE the Range header or "-"); GET /_mock/clear empties the log.

Usage: hub_mock.py serve --port-file FILE --repo ORG/NAME=DIR [--repo ...] [--private ORG/NAME=TOKEN]
                         [--gated ORG/NAME=TOKEN]
       hub_mock.py gguf OUT ARCH FILE_TYPE SIZE_LABEL PAD_BYTES   (a small valid GGUF file)
Only 127.0.0.1 is ever bound or named.
"""
import argparse
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")
LFS_NAMES = ("tokenizer.json",)


def git_blob_id(data_path, size):
    h = hashlib.sha1(b"blob %d\0" % size)
    with open(data_path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


class Repo:
    def __init__(self, name, folder):
        self.name = name
        self.files = {}  # path -> dict(local, size, oid, lfs sha256 or None)
        for base, dirs, names in os.walk(folder):
            dirs.sort()
            for n in sorted(names):
                local = os.path.join(base, n)
                rel = os.path.relpath(local, folder).replace(os.sep, "/")
                size = os.path.getsize(local)
                lfs = rel.endswith(LFS_SUFFIXES) or os.path.basename(rel) in LFS_NAMES
                self.files[rel] = {"local": local, "size": size, "oid": git_blob_id(local, size),
                                   "sha256": sha256_of(local) if lfs else None}
        h = hashlib.sha1(name.encode())
        for rel in sorted(self.files):
            h.update(rel.encode() + self.files[rel]["oid"].encode())
        self.commit = h.hexdigest()


class State:
    def __init__(self):
        self.repos = {}
        self.private = {}
        self.gated = {}
        self.faults = []
        self.log = []
        self.lock = threading.Lock()
        self.storage_port = None
        self.by_sha = {}

    def take_fault(self, path):
        with self.lock:
            for f in self.faults:
                if f["times"] > 0 and f["match"] in path:
                    f["times"] -= 1
                    return dict(f)
        return None


STATE = State()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    storage = False

    def log_message(self, fmt, *args):
        pass

    def record(self):
        auth = "auth" if self.headers.get("Authorization") else "-"
        rng = self.headers.get("Range", "-").replace(" ", "")
        with STATE.lock:
            STATE.log.append("%s %s %s %s %s" % ("storage" if self.storage else "hub", self.command, self.path, auth, rng))

    def reply(self, code, body=b"", headers=None, error_code=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if error_code:
            self.send_header("X-Error-Code", error_code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, code, error_code, message):
        self.reply(code, {"error": message}, {"Content-Type": "application/json", "X-Error-Message": message}, error_code)

    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def handle_any(self):
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/_mock/"):
            return self.control(path)
        self.record()
        if self.storage:
            if self.headers.get("Authorization"):
                with STATE.lock:
                    STATE.log.append("LEAK: a token reached the storage host")
                return self.error(400, None, "a token was sent to the storage host")
            sha = path.rsplit("/", 1)[-1]
            entry = STATE.by_sha.get(sha)
            if not entry:
                return self.error(404, "EntryNotFound", "no such object")
            return self.send_file(entry, path)
        fault = STATE.take_fault(path)
        if fault and fault["kind"] == "status":
            return self.fault_status(fault)
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if len(parts) >= 5 and parts[0] == "api" and parts[1] == "models":
            return self.api(parts[2] + "/" + parts[3], parts[4:], fault)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), fault)
        return self.error(404, None, "not found")

    def fault_status(self, fault):
        code = int(fault.get("code", 500))
        headers = {}
        if code == 429 and "retry_after" in fault:
            headers["Retry-After"] = str(fault["retry_after"])
        ecode = fault.get("error_code") or {401: "RepoNotFound", 403: "GatedRepo", 404: "RepoNotFound"}.get(code)
        self.reply(code, {"error": "fault %d" % code}, headers, ecode)

    def control(self, path):
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        if path == "/_mock/fault":
            f = {"match": q["match"], "kind": q["kind"], "times": int(q.get("times", 1))}
            for k in ("after", "code", "retry_after", "rate"):
                if k in q:
                    f[k] = int(q[k])
            if "error_code" in q:
                f["error_code"] = q["error_code"]
            with STATE.lock:
                STATE.faults.append(f)
            return self.reply(200, b"ok\n")
        if path == "/_mock/log":
            with STATE.lock:
                return self.reply(200, ("\n".join(STATE.log) + "\n").encode())
        if path == "/_mock/clear":
            with STATE.lock:
                STATE.log.clear()
                STATE.faults.clear()
            return self.reply(200, b"ok\n")
        if path == "/_mock/repos":
            return self.reply(200, {k: {"commit": r.commit} for k, r in STATE.repos.items()})
        return self.error(404, None, "no such control")

    def access(self, repo_id):
        """None when the request may read repo_id, else the error it gets."""
        repo = STATE.repos.get(repo_id)
        auth = self.headers.get("Authorization", "")
        if repo_id in STATE.private and auth != "Bearer " + STATE.private[repo_id]:
            return (401, "RepoNotFound", "Repository not found")
        if repo_id in STATE.gated and auth != "Bearer " + STATE.gated[repo_id]:
            if auth:
                return (403, "GatedRepo", "Access to model %s is restricted; you must accept its conditions" % repo_id)
            return (401, "GatedRepo", "Access to model %s is restricted; you must be authenticated" % repo_id)
        if not repo:
            return (401 if not auth else 404, "RepoNotFound", "Repository not found")
        return None

    def revision(self, repo, rev):
        return rev in ("main", repo.commit)

    def api(self, repo_id, rest, fault):
        denied = self.access(repo_id)
        if denied:
            return self.error(*denied)
        repo = STATE.repos[repo_id]
        if rest[0] == "revision" and len(rest) >= 2:
            rev = "/".join(rest[1:])
            if not self.revision(repo, rev):
                return self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
            return self.reply(200, {"id": repo_id, "modelId": repo_id, "sha": repo.commit, "private": False,
                                    "siblings": [{"rfilename": p} for p in sorted(repo.files)]},
                              {"Content-Type": "application/json"})
        if rest[0] == "tree" and len(rest) >= 2:
            if fault and fault["kind"] == "unsafe":
                return self.reply(200, [{"type": "file", "oid": "0" * 40, "size": 1, "path": "../escape"}],
                                  {"Content-Type": "application/json"})
            rev = rest[1]
            if not self.revision(repo, rev):
                return self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
            sub = "/".join(rest[2:])
            out = []
            for p in sorted(repo.files):
                if sub and not p.startswith(sub + "/"):
                    continue
                f = repo.files[p]
                item = {"type": "file", "oid": f["oid"], "size": f["size"], "path": p}
                if f["sha256"]:
                    item["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": 134}
                out.append(item)
            return self.reply(200, out, {"Content-Type": "application/json"})
        return self.error(404, None, "no such api")

    def resolve(self, repo_id, rev, file, fault):
        denied = self.access(repo_id)
        if denied:
            return self.error(*denied)
        repo = STATE.repos[repo_id]
        if not self.revision(repo, rev):
            return self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        f = repo.files.get(file)
        if not f:
            return self.error(404, "EntryNotFound", "%s does not exist on %s" % (file, rev))
        base = {"X-Repo-Commit": repo.commit}
        if fault and fault["kind"] == "loop":
            return self.reply(302, b"", {"Location": self.path})
        if f["sha256"]:
            loc = "http://127.0.0.1:%d/lfs/%s" % (STATE.storage_port, f["sha256"])
            base.update({"X-Linked-Etag": '"%s"' % f["sha256"], "X-Linked-Size": str(f["size"]),
                         "ETag": '"%s"' % f["oid"], "Location": loc})
            return self.reply(302, b"", base)
        base["ETag"] = '"%s"' % f["oid"]
        return self.send_file(f, self.path, base, fault)

    def send_file(self, f, path, headers=None, fault=None):
        if fault is None:
            fault = STATE.take_fault(path)
        if fault and fault["kind"] == "status":
            return self.fault_status(fault)
        size = f["size"]
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0] or 0)
            if start >= size and size > 0:
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % size})
        self.send_response(206 if start else 200)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        extra = 1000 if fault and fault["kind"] == "long" else 0
        self.send_header("Content-Length", str(size - start + extra))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.flush()
        with open(f["local"], "rb") as src:
            if fault and fault["kind"] == "close":
                src.seek(start)
                self.wfile.write(src.read(max(0, fault.get("after", 0))))
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault and fault["kind"] == "long":
                src.seek(start)
                self.wfile.write(src.read() + b"\0" * 1000)
                return
            if fault and fault["kind"] == "badhash":
                src.seek(start)
                data = bytearray(src.read())
                if data:
                    data[len(data) // 2] ^= 0xFF
                self.wfile.write(bytes(data))
                return
            if fault and fault["kind"] == "trickle":
                rate = max(1, fault.get("rate", 1000))
                src.seek(start)
                step = max(1, rate // 10)
                try:
                    while True:
                        chunk = src.read(step)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                return
            try:
                self.connection.sendfile(src, start, size - start)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True


class StorageHandler(Handler):
    storage = True


def serve(args):
    for spec in args.repo:
        name, folder = spec.split("=", 1)
        repo = Repo(name, folder)
        STATE.repos[name] = repo
        for f in repo.files.values():
            if f["sha256"]:
                STATE.by_sha[f["sha256"]] = f
    for spec in args.private:
        name, tok = spec.split("=", 1)
        STATE.private[name] = tok
    for spec in args.gated:
        name, tok = spec.split("=", 1)
        STATE.gated[name] = tok
    ThreadingHTTPServer.daemon_threads = True
    hub = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    storage = ThreadingHTTPServer(("127.0.0.1", 0), StorageHandler)
    STATE.storage_port = storage.server_address[1]
    threading.Thread(target=storage.serve_forever, daemon=True).start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d %d\n" % (hub.server_address[1], STATE.storage_port))
    os.replace(tmp, args.port_file)
    hub.serve_forever()


def write_gguf(out, arch, file_type, size_label, pad):
    """A small valid GGUF v3: three metadata values and one F32 tensor of `pad` floats."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    kv = [("general.architecture", 8, s(arch)), ("general.file_type", 4, struct.pack("<I", file_type)),
          ("general.size_label", 8, s(size_label))]
    n = max(1, pad // 4)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kv))
    for k, t, v in kv:
        head += s(k) + struct.pack("<I", t) + v
    head += s("token_embd.weight") + struct.pack("<I", 1) + struct.pack("<Q", n) + struct.pack("<I", 0) + struct.pack("<Q", 0)
    head += b"\0" * ((32 - len(head) % 32) % 32)
    with open(out, "wb") as f:
        f.write(head)
        f.write(os.urandom(4 * n))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port-file", required=True)
    s.add_argument("--repo", action="append", default=[])
    s.add_argument("--private", action="append", default=[])
    s.add_argument("--gated", action="append", default=[])
    g = sub.add_parser("gguf")
    g.add_argument("out")
    g.add_argument("arch")
    g.add_argument("file_type", type=int)
    g.add_argument("size_label")
    g.add_argument("pad", type=int)
    a = p.parse_args()
    if a.cmd == "serve":
        serve(a)
    else:
        write_gguf(a.out, a.arch, a.file_type, a.size_label, a.pad)


if __name__ == "__main__":
    main()

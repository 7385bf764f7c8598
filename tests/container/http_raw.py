"""HTTP/1.1 over a plain socket, for the bytes a client library would not send and for reading
the answers exactly as they came (several on one connection, interim 1xx included). Shared by
e2e_http.py and e2e_stress.py; harness.py's http() is the ordinary client."""
import socket


def connect(port, rcvbuf=None, timeout=None):
    """A connection to the server on 127.0.0.1:`port`; `timeout` (seconds) applies to the connect
    and to every later operation (None: blocking)."""
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def read_all(s, timeout=10):
    """Everything until the server closes (or `timeout` passes)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def exchange(port, data, timeout=10):
    """Sends `data` on a new connection and returns what comes back until the server closes it
    (or `timeout` passes)."""
    with connect(port, timeout=timeout) as s:
        s.sendall(data)
        return read_all(s, timeout)


def request(method, target, body=b"", headers=(), version="1.1"):
    """The bytes of one request; Content-Length is added for a body unless `headers` frame it."""
    head = f"{method} {target} HTTP/{version}\r\nHost: x\r\n"
    for h in headers:
        head += h + "\r\n"
    if body and not any(h.lower().startswith(("content-length", "transfer-encoding"))
                        for h in headers):
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def parse_responses(data, bodiless=()):
    """[(status, headers dict lower-case, body)] of Content-Length-framed responses; interim
    1xx responses are included (body b""); the final responses numbered in `bodiless` (answers
    to HEAD) have no body whatever their Content-Length."""
    out = []
    finals = 0
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):  # not a response: the framing was lost
            out.append((-1, {}, data))
            break
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = 0 if status < 200 else int(headers.get("content-length", 0))
        if status >= 200:
            if finals in bodiless:
                n = 0
            finals += 1
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


def final(responses):
    """The last non-interim response."""
    finals = [r for r in responses if r[0] >= 200]
    return finals[-1] if finals else (0, {}, b"")

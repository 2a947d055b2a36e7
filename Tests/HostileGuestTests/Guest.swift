import Foundation
import PartyCastTestSupport
import PartyCastWire

/// A hostile guest's connection, from the protocol alone: a blocking or non-blocking TCP socket
/// bound to a loopback address of its own (127.0.0.2), so a real listener on 127.0.0.1 is another
/// machine as far as the broadcaster's per-address caps are concerned.
final class GuestSocket {
    let fd: Int32

    /// Nil when the broadcaster does not accept (or the socket cannot be made).
    init?(port: Int, from source: String = "127.0.0.2", receiveBufferBytes: Int32? = nil) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        if var bytes = receiveBufferBytes { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, socklen_t(MemoryLayout<Int32>.size)) }
        var local = Self.address(source, port: 0)
        var remote = Self.address("127.0.0.1", port: port)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } } == 0
        let connected = bound && withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) }
        } == 0
        guard connected else {
            close(fd)
            return nil
        }
    }

    deinit { close(fd) }

    static func address(_ ip: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(ip)
        return address
    }

    /// Writes all of `bytes` unless the broadcaster closed the connection (false then).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    func send(_ body: PCEnvelope.OneOf_Body) -> Bool {
        var envelope = PCEnvelope()
        envelope.body = body
        return send((try? WireFraming.encode(envelope)) ?? [])
    }

    /// A Hello as a public party's listener sends it.
    func hello(name: String = "guest") -> Bool {
        var hello = PCHello()
        hello.protocolVersion = partyCastProtocolVersion
        hello.listenerName = name
        hello.hostName = "guest-host"
        hello.listenerID = "guest-\(fd)"
        return send(.hello(hello))
    }

    /// Whether the broadcaster has closed its side within `timeout` seconds (EOF or a reset when
    /// reading what is left), reading and discarding whatever else arrives meanwhile.
    func closedByPeer(within timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline {
            var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 100) == 1 else { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { return true }
        }
        return false
    }
}

/// The broadcaster's resident memory now (VmRSS), in MiB; 0 once it has exited.
func residentMiB(_ pid: Int32) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kib = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
    return kib / 1024
}

/// Lets this test process hold a thousand guest sockets (the usual soft limit is 1,024).
func raiseTestOpenFileLimit() {
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
}

/// `curl` against the control port: the status code and the body (a real HTTP client, and the
/// headers a browser would send when given).
func curl(_ arguments: [String]) throws -> (status: Int, body: String) {
    let result = try runProcess("curl", ["-s", "--max-time", "5", "-w", "\n%{http_code}"] + arguments, timeout: 10)
    var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let status = Int(lines.popLast() ?? "") ?? 0
    return (status, lines.joined(separator: "\n"))
}

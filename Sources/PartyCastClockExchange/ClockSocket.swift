import CSocketMessages
#if canImport(Glibc)
import Glibc
#endif
import PartyCastCore

/// A UDP socket for clock datagrams that learns when each one reached this host from the kernel
/// (SO_TIMESTAMPNS), not from whenever a busy thread got round to reading it: a CPU hog or a late
/// wakeup delays the reader, not the timestamp.
final class ClockSocket: Sendable {
    /// One datagram read, with its kernel receive time on CLOCK_MONOTONIC.
    struct Received {
        var count: Int
        var arrivedAt: UInt64
        var from: Address
    }

    /// Datagrams longer than this are not ours (a signed answer is ~70 bytes); they are read and
    /// dropped, never parsed.
    static let maximumDatagram = 256

    let fd: Int32

    /// A socket bound to `host:port` (port 0: any free one), for the responder.
    convenience init(bindingTo host: String, port: Int) throws(SystemCallError) {
        let address = try Self.resolve(host: host, port: port, passive: true)
        try self.init(family: Int32(address.storage.ss_family))
        var reuse: Int32 = 1
        _ = try systemCall("setsockopt(SO_REUSEADDR)") { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size)) }
        try Self.withSocketAddress(address) { pointer, length throws(SystemCallError) in
            _ = try systemCall("bind") { Glibc.bind(fd, pointer, length) }
        }
    }

    /// A socket connected to `host:port`, for a listener: the kernel then delivers datagrams from
    /// that address and port only.
    convenience init(connectingTo host: String, port: Int) throws(SystemCallError) {
        let address = try Self.resolve(host: host, port: port, passive: false)
        try self.init(family: Int32(address.storage.ss_family))
        try Self.withSocketAddress(address) { pointer, length throws(SystemCallError) in
            _ = try systemCall("connect") { Glibc.connect(fd, pointer, length) }
        }
    }

    /// DSCP EF (46) in the TOS byte or traffic class of every clock datagram: the class RFC 8325
    /// maps to Wi-Fi's voice access category, so under WMM a station or access point sends it from
    /// its voice queue, not from behind the audio in the best-effort one, and waits less for the air.
    static let trafficClass: Int32 = 46 << 2

    private init(family: Int32) throws(SystemCallError) {
        fd = try systemCall("socket") { socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        do {
            _ = try systemCall("setsockopt(SO_TIMESTAMPNS)") { partycast_enable_receive_timestamps(fd) }
            var trafficClass = Self.trafficClass
            let length = socklen_t(MemoryLayout<Int32>.size)
            if family == AF_INET6 {
                _ = try systemCall("setsockopt(IPV6_TCLASS)") { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_TCLASS, &trafficClass, length) }
            } else {
                _ = try systemCall("setsockopt(IP_TOS)") { setsockopt(fd, Int32(IPPROTO_IP), IP_TOS, &trafficClass, length) }
            }
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// The port the socket is bound to.
    var localPort: Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0 else { return 0 }
        return withUnsafeBytes(of: storage) { raw in
            // sin_port and sin6_port sit at the same offset, in network order.
            Int(UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self)))
        }
    }

    /// Sends to the connected peer, or to `address` (the responder's answer to whoever asked).
    /// A failure is the datagram's loss, which the exchange is built to survive and counts as one.
    func send(_ bytes: [UInt8], to address: Address? = nil) {
        _ = try? bytes.withUnsafeBytes { payload throws(SystemCallError) in
            if var address {
                try withUnsafePointer(to: &address.storage) { storage throws(SystemCallError) in
                    try storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer throws(SystemCallError) in
                        try systemCall("sendto") { sendto(fd, payload.baseAddress, payload.count, Int32(MSG_DONTWAIT), pointer, address.length) }
                    }
                }
            } else {
                try systemCall("send") { Glibc.send(fd, payload.baseAddress, payload.count, Int32(MSG_DONTWAIT)) }
            }
        }
    }

    /// Reads one datagram into `buffer` without blocking; nil when none is waiting (or the read
    /// failed: the datagram is lost either way). A datagram longer than the buffer comes back
    /// truncated with `count` > buffer.count, for the caller to drop. The first datagrams on a host
    /// where no socket had stamps on may be stamped when read (the kernel turns stamping on through
    /// deferred work): later than they came, never earlier, which the estimator reads as queueing.
    func receive(into buffer: inout [UInt8]) -> Received? {
        var from = sockaddr_storage()
        var fromLength = socklen_t(0)
        var arrival = timespec()
        let fd = self.fd
        guard let count = try? buffer.withUnsafeMutableBytes({ payload throws(SystemCallError) in
            try systemCall("recvmsg") { partycast_receive_stamped(fd, payload.baseAddress, payload.count, &from, &fromLength, &arrival) }
        }) else { return nil }
        let arrivedAt = Self.monotonic(fromRealtime: arrival) ?? monotonicNanoseconds()
        return Received(count: count, arrivedAt: arrivedAt, from: Address(storage: from, length: fromLength))
    }

    /// The kernel's CLOCK_REALTIME arrival stamp on CLOCK_MONOTONIC, by the two clocks' difference
    /// read right now: the datagram arrived microseconds ago, so a slewing or stepped realtime clock
    /// cannot skew it measurably. Nil when there was no stamp, or a step made it implausible.
    static func monotonic(fromRealtime stamp: timespec) -> UInt64? {
        guard stamp.tv_sec != 0 || stamp.tv_nsec != 0 else { return nil }
        let (realtime, monotonic) = clocksReadTogether()
        let age = realtime &- (Int64(stamp.tv_sec) &* 1_000_000_000 &+ Int64(stamp.tv_nsec))
        // A realtime step between arrival and now shows as an age outside [0, 1 s]: not trusted.
        guard age >= 0, age < 1_000_000_000 else { return nil }
        return monotonic &- UInt64(age)
    }

    /// CLOCK_REALTIME and CLOCK_MONOTONIC at one instant (ns). A thread preempted between two reads
    /// would shift the pair by however long it waited: under two CPU hogs here, 426 of 20 million
    /// pairs by over 15 µs (and one stamp 20 µs early held a listener's clock 17 µs off for a
    /// minute). So realtime is read between two monotonic reads and set against their middle, and
    /// the tightest of three tries counts: none of 20 million wider than 0.4 µs.
    private static func clocksReadTogether() -> (realtime: Int64, monotonic: UInt64) {
        func read(_ clock: clockid_t) -> Int64 {
            var time = timespec()
            clock_gettime(clock, &time)
            return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
        }
        var best = (width: Int64.max, realtime: Int64(0), monotonic: Int64(0))
        for _ in 0..<3 {
            let before = read(CLOCK_MONOTONIC), realtime = read(CLOCK_REALTIME), after = read(CLOCK_MONOTONIC)
            if after &- before < best.width { best = (after &- before, realtime, before &+ (after &- before) / 2) }
        }
        return (best.realtime, UInt64(bitPattern: best.monotonic))
    }

    // MARK: Addresses

    struct Address {
        var storage: sockaddr_storage
        var length: socklen_t
    }

    /// A numeric host (IPv4 or IPv6, as the TCP connection's peer address reads) and port.
    private static func resolve(host: String, port: Int, passive: Bool) throws(SystemCallError) -> Address {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list, let address = first.pointee.ai_addr else {
            if let list { freeaddrinfo(list) }
            throw SystemCallError(call: "getaddrinfo(\(host))", errno: EINVAL)
        }
        defer { freeaddrinfo(list) }
        var storage = sockaddr_storage()
        let length = first.pointee.ai_addrlen
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length))) }
        return Address(storage: storage, length: length)
    }

    private static func withSocketAddress<T>(_ address: Address,
                                             _ body: (UnsafePointer<sockaddr>, socklen_t) throws(SystemCallError) -> T) throws(SystemCallError) -> T {
        var storage = address.storage
        return try withUnsafePointer(to: &storage) { pointer throws(SystemCallError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer throws(SystemCallError) in
                try body(sockaddrPointer, address.length)
            }
        }
    }
}

// A bad link at the IP level, in user space (where `tc netem` is not available): two TUN devices,
// one in the network namespace this runs in ("near") and one in another ("far"), and every IP
// packet forwarded between them with per-direction impairments. TCP and UDP alike cross it, so
// jitter, loss and stalls hit the protocol where a real Wi-Fi link would.
//
//   partycast-netem --peer-netns PATH [--dev NAME] [--peer-dev NAME] [IMPAIRMENTS] [--seed N]
//                   [--lifetime-s S] [--queue-kb K] [--ready-file PATH] [--normal-priority]
//
// The device NAME (default netem0) is made in this process's namespace, PEER-DEV (default: NAME) in
// the one PATH names (/run/netns/NS); the caller gives them addresses and brings them up. They vanish
// when this exits. "down" is near → far (broadcaster to far listeners), "up" is far → near.
//
// Impairments, for both directions, or one with an --up- or --down- prefix (--down-jitter-ms 0-10):
//   --jitter-ms A-B       hold each packet a uniform random time in [A, B] ms (or exactly A: --jitter-ms A);
//                         packets overtake each other as on a real IP link, unless
//   --keep-order          no packet leaves before one that came earlier (in its direction)
//   --loss PCT            drop each packet with probability PCT %
//   --stall-ms X --stall-every-s Y
//                         every Y s (from the start), hold everything for X ms, then release it in
//                         order: a Wi-Fi retransmission storm
//   --rate-kbps R         a bottleneck of R kbit/s with a FIFO queue in front of it (queueing under load)
//   --spike-pct P --spike-ms A-B
//                         hold P % of packets [A, B] ms instead of their jitter: a retransmission
//   --burst-ms A-B --burst-every-s G --burst-length-ms L
//                         Wi-Fi's bad spells (a two-state Gilbert–Elliott model): spells of mean L ms,
//                         mean G s apart (both exponential), in which every packet is held [A, B] ms
//                         instead of its jitter or spike (contention, a neighbour's burst, power save)
// Every packet held counts against --queue-kb (default 4096) per direction; beyond it, it is dropped.
// The run is reproducible from --seed (default 1) given the same packets. --lifetime-s (default 3600)
// bounds the run; SIGTERM, SIGINT or the lifetime's end stop it cleanly with one summary line on
// stderr. It runs at real-time priority where allowed (root), so the host's load does not leak into
// the link; --normal-priority leaves it at the default, as a relay not set up for real time runs,
// and a busy CPU then holds packets past their drawn holds. Exit status: 0 stopped or lifetime
// over, 1 usage or setup error or a device gone.
import CTun
#if canImport(Glibc)
import Glibc
#endif

// MARK: Output

func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return }
        offset += n
    }
}

func fail(_ why: String) -> Never {
    say("partycast-netem: \(why)")
    exit(1)
}

func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

/// `value` with `decimals` digits after the point (no Foundation here).
func fixed(_ value: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int64((abs(value) * scale).rounded())
    let whole = scaled / Int64(scale), fraction = scaled % Int64(scale)
    let sign = value < 0 && scaled != 0 ? "-" : ""
    guard decimals > 0 else { return "\(sign)\(whole)" }
    let digits = String(fraction)
    return "\(sign)\(whole)." + String(repeating: "0", count: decimals - digits.count) + digits
}

// MARK: Time and randomness

func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// SplitMix64: small, fast and the same everywhere, so a seed means the same run.
struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }
}

// MARK: The link

/// A packet on its way, due out at `due`; `sequence` keeps arrival order among equal times.
struct Held {
    let due: Int64
    let sequence: UInt64
    let direction: Int
    let bytes: [UInt8]
    func before(_ other: Held) -> Bool { due != other.due ? due < other.due : sequence < other.sequence }
}

/// Binary min-heap on (due, sequence).
struct Heap {
    private var items: [Held] = []
    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var first: Held? { items.first }

    mutating func push(_ item: Held) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].before(items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Held {
        let top = items[0]
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < items.count && items[left].before(items[smallest]) { smallest = left }
                if right < items.count && items[right].before(items[smallest]) { smallest = right }
                guard smallest != parent else { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}

struct Counters {
    var forwarded = 0, lost = 0, overQueue = 0, writeErrors = 0, heldBytes = 0, maxHeldBytes = 0
    /// IPv4 UDP packets forwarded and their bytes (IP header on): the clock exchange's share of the link.
    var udpForwarded = 0, udpBytes = 0
}

/// One direction's impairments applied to the packets that enter it.
struct Direction {
    let impairment: Impairment
    let start: Int64
    var random: SplitMix64
    var busyUntil: Int64 = 0
    var lastDue: Int64 = 0
    var counters = Counters()
    /// Spikes and bursts draw from a generator of their own, so they do not shift the jitter's and
    /// loss's sequences (a run with them is the same link plus them).
    var burstRandom: SplitMix64
    var inBurst = false
    var spellEnd: Int64 = 0

    init(impairment: Impairment, start: Int64, seed: UInt64) {
        self.impairment = impairment
        self.start = start
        random = SplitMix64(state: seed)
        burstRandom = SplitMix64(state: seed ^ 0x5EED_B125_7000_0000)
        spellEnd = start
    }

    /// The hold of a packet leaving the queue at `t` in place of its jitter, if a spike or a burst takes it.
    mutating func burstHold(at t: Int64) -> Int64? {
        let spikeDraw = burstRandom.unit(), holdDraw = burstRandom.unit()
        if impairment.burstEveryS > 0 {
            while t >= spellEnd {
                inBurst.toggle()
                let mean = inBurst ? impairment.burstLengthMs * 1e6 : impairment.burstEveryS * 1e9
                spellEnd += max(1, Int64(-mean * log(1 - burstRandom.unit())))
            }
            if inBurst { return Int64((impairment.burstMs.low + (impairment.burstMs.high - impairment.burstMs.low) * holdDraw) * 1e6) }
        }
        if spikeDraw * 100 < impairment.spikePercent {
            return Int64((impairment.spikeMs.low + (impairment.spikeMs.high - impairment.spikeMs.low) * holdDraw) * 1e6)
        }
        return nil
    }

    /// When a packet of `size` bytes arriving `now` leaves, or nil when it is lost.
    mutating func due(arriving now: Int64, size: Int) -> Int64? {
        // Always draw both numbers, so one option does not shift the other's random sequence.
        let lossDraw = random.unit(), jitterDraw = random.unit()
        if lossDraw * 100 < impairment.lossPercent { return nil }
        var t = now
        if impairment.rateKbps > 0 {
            // FIFO into the bottleneck: it leaves once everything before it has been sent.
            let start = max(now, busyUntil)
            busyUntil = start + Int64(Double(size * 8) / (impairment.rateKbps * 1000) * 1e9)
            t = busyUntil
        }
        let (low, high) = impairment.jitterMs
        t += burstHold(at: t) ?? Int64((low + (high - low) * jitterDraw) * 1e6)
        if impairment.stallMs > 0 {
            let period = Int64(impairment.stallEveryS * 1e9), length = Int64(impairment.stallMs * 1e6)
            let k = (t - start) / period, into = (t - start) % period
            if k >= 1 && into < length { t = start + k * period + length }
        }
        if impairment.keepOrder { t = max(t, lastDue) }
        lastDue = max(lastDue, t)
        return t
    }
}

// MARK: Setup

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))
let peerDevice = options.peerDevice ?? options.device

/// A TUN device in the current namespace, or the reason there is none.
func openTun(_ name: String, where place: String) -> Int32 {
    guard name.utf8.count < 16 else { fail("device name \(name) is longer than 15 bytes") }
    let fd = pcnetem_tun_open(name)
    guard fd >= 0 else { fail("cannot make TUN device \(name) in \(place): \(errorText(-fd)) (needs root and /dev/net/tun)") }
    return fd
}

let ownNamespace = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)
guard ownNamespace >= 0 else { fail("cannot open /proc/self/ns/net: \(errorText(errno))") }
let peerNamespace = open(options.peerNetns, O_RDONLY | O_CLOEXEC)
guard peerNamespace >= 0 else { fail("cannot open network namespace \(options.peerNetns): \(errorText(errno))") }
let nearFd = openTun(options.device, where: "this network namespace")
// One thread: setns moves it into the peer namespace for the second device, and straight back.
var entered = pcnetem_enter_netns(peerNamespace)
guard entered == 0 else { fail("cannot enter \(options.peerNetns): \(errorText(-entered))") }
let farFd = openTun(peerDevice, where: options.peerNetns)
entered = pcnetem_enter_netns(ownNamespace)
guard entered == 0 else { fail("cannot return to this process's network namespace: \(errorText(-entered))") }
close(peerNamespace)
close(ownNamespace)
let stopFd = pcnetem_stop_signals_fd()
guard stopFd >= 0 else { fail("cannot watch SIGTERM/SIGINT: \(errorText(-stopFd))") }
_ = pcnetem_tight_timer_slack()
// Real-time priority, so that a packet leaves when its drawn hold is over, not when a loaded machine
// (the sync tests run a CPU hog) gets round to waking this thread: starved, it added delays of its own
// that thinned out the least delays clock sync rests on, a link other than the one asked for. It
// sleeps in ppoll between packets and takes little CPU.
var realtimePriority = sched_param(sched_priority: 50)
let scheduling: String
if !options.realTime {
    scheduling = "normal priority (--normal-priority): hold times stretch when the CPU is busy"
} else if sched_setscheduler(0, SCHED_FIFO, &realtimePriority) == 0 {
    scheduling = "real-time (SCHED_FIFO 50)"
} else {
    scheduling = "NOT real-time (\(errorText(errno))): hold times stretch when the CPU is busy"
}

let started = monotonicNanoseconds()
let endAt = started + Int64(options.lifetimeS * 1e9)
let directions = (0..<2).map { d in
    Direction(impairment: options.impairments[d], start: started, seed: options.seed &* 0x2545_F491_4F6C_DD1D &+ UInt64(d + 1))
}
say("partycast-netem: \(options.device) ↔ \(peerDevice) in \(options.peerNetns), seed \(options.seed), lifetime \(fixed(options.lifetimeS, 1)) s; "
    + "down: \(options.impairments[0].description); up: \(options.impairments[1].description); \(scheduling)")
if let readyFile = options.readyFile {
    // Written whole under another name, then renamed: whoever waits for it never reads half of it.
    let temporary = readyFile + ".new"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { fail("cannot write \(temporary): \(errorText(errno))") }
    let text = Array("\(getpid())\n".utf8)
    _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    guard rename(temporary, readyFile) == 0 else { fail("cannot rename \(temporary): \(errorText(errno))") }
}

// MARK: The loop: one thread, ppoll until the next packet is due, a signal comes or a device is readable

/// Everything the loop touches, in one value (top-level variables would belong to the main actor).
struct Link {
    var directions: [Direction]
    let queueBytes: Int
    let endAt: Int64
    var heap = Heap()
    var sequence: UInt64 = 0
    var buffer = [UInt8](repeating: 0, count: 65_536)
    var fds: [pollfd]
    let outputs: [Int32]
    let stopFd: Int32

    init(near: Int32, far: Int32, stopFd: Int32, directions: [Direction], queueBytes: Int, endAt: Int64) {
        fds = [pollfd(fd: near, events: Int16(POLLIN), revents: 0), pollfd(fd: far, events: Int16(POLLIN), revents: 0),
               pollfd(fd: stopFd, events: Int16(POLLIN), revents: 0)]
        outputs = [far, near]  // down goes out on the far device, up on the near one
        self.stopFd = stopFd
        self.directions = directions
        self.queueBytes = queueBytes
        self.endAt = endAt
    }

    /// Sends every packet that is due.
    mutating func release(now: Int64) {
        while let top = heap.first, top.due <= now {
            let packet = heap.pop()
            directions[packet.direction].counters.heldBytes -= packet.bytes.count
            let written = packet.bytes.withUnsafeBytes { write(outputs[packet.direction], $0.baseAddress, $0.count) }
            if written == packet.bytes.count {
                directions[packet.direction].counters.forwarded += 1
                if packet.bytes.count >= 20, packet.bytes[0] >> 4 == 4, packet.bytes[9] == UInt8(IPPROTO_UDP) {
                    directions[packet.direction].counters.udpForwarded += 1
                    directions[packet.direction].counters.udpBytes += packet.bytes.count
                }
            } else {
                directions[packet.direction].counters.writeErrors += 1
            }
        }
    }

    /// Reads what the kernel routed into device `direction` (0 near, 1 far); a bounded batch, so that
    /// one busy side cannot starve the other or the releases.
    mutating func take(from direction: Int) {
        for _ in 0..<256 {
            let fd = fds[direction].fd
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            let now = monotonicNanoseconds()
            guard let due = directions[direction].due(arriving: now, size: n) else { directions[direction].counters.lost += 1; continue }
            guard directions[direction].counters.heldBytes + n <= queueBytes else { directions[direction].counters.overQueue += 1; continue }
            directions[direction].counters.heldBytes += n
            directions[direction].counters.maxHeldBytes = max(directions[direction].counters.maxHeldBytes, directions[direction].counters.heldBytes)
            sequence += 1
            heap.push(Held(due: due, sequence: sequence, direction: direction, bytes: Array(buffer[0..<n])))
        }
    }

    /// Forwards until a stop signal, the lifetime's end or a device failure; says which, and whether it failed.
    mutating func run() -> (reason: String, failed: Bool) {
        while true {
            let now = monotonicNanoseconds()
            release(now: now)
            guard now < endAt else { return ("lifetime over", false) }
            let wait = min(heap.first?.due ?? endAt, endAt) - now
            for i in fds.indices { fds[i].revents = 0 }
            let polled = pcnetem_poll_ns(&fds, UInt(fds.count), wait)
            if polled < 0 {
                guard -polled == EINTR else { fail("ppoll: \(errorText(-polled))") }
                continue
            }
            if fds[2].revents != 0 {
                var info = signalfd_siginfo()
                let n = read(stopFd, &info, MemoryLayout<signalfd_siginfo>.size)
                return (n > 0 && info.ssi_signo == UInt32(SIGINT) ? "stopped by SIGINT" : "stopped by SIGTERM", false)
            }
            for direction in 0..<2 where fds[direction].revents != 0 {
                if fds[direction].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 {
                    return ("the \(direction == 0 ? "near" : "far") device failed", true)
                }
                take(from: direction)
            }
        }
    }

    /// Drops what is still held and says, per direction, what happened to the packets.
    mutating func summary() -> String {
        var unsent = [0, 0]
        while !heap.isEmpty { unsent[heap.pop().direction] += 1 }
        return (0..<2).map { d -> String in
            let c = directions[d].counters
            return "\(d == 0 ? "down" : "up") forwarded \(c.forwarded) lost \(c.lost) over-queue \(c.overQueue) write-errors \(c.writeErrors)"
                + " unsent \(unsent[d]) max-held-kb \(c.maxHeldBytes / 1024) udp \(c.udpForwarded) udp-bytes \(c.udpBytes)"
        }.joined(separator: "; ")
    }
}

var link = Link(near: nearFd, far: farFd, stopFd: stopFd, directions: directions, queueBytes: options.queueBytes, endAt: endAt)
let (stopReason, failed) = link.run()
let elapsed = Double(monotonicNanoseconds() - started) / 1e9
say("partycast-netem: \(stopReason) after \(fixed(elapsed, 1)) s; " + link.summary())
close(nearFd)
close(farFd)
exit(failed ? 1 : 0)

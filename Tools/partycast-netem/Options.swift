// partycast-netem's command line: the impairments of each direction (see main.swift).
#if canImport(Glibc)
import Glibc
#endif

struct Impairment {
    var jitterMs: (low: Double, high: Double) = (0, 0)
    var keepOrder = false
    var lossPercent = 0.0
    var stallMs = 0.0
    var stallEveryS = 0.0
    var rateKbps = 0.0
    var spikePercent = 0.0
    var spikeMs: (low: Double, high: Double) = (0, 0)
    var burstMs: (low: Double, high: Double) = (0, 0)
    var burstEveryS = 0.0
    var burstLengthMs = 0.0

    var description: String {
        var parts: [String] = []
        if jitterMs.high > 0 { parts.append("jitter \(fixed(jitterMs.low, 1))-\(fixed(jitterMs.high, 1)) ms" + (keepOrder ? " in order" : "")) }
        if lossPercent > 0 { parts.append("loss \(fixed(lossPercent, 2)) %") }
        if stallMs > 0 { parts.append("stall \(fixed(stallMs, 0)) ms every \(fixed(stallEveryS, 1)) s") }
        if rateKbps > 0 { parts.append("rate \(fixed(rateKbps, 0)) kbit/s") }
        if spikePercent > 0 { parts.append("\(fixed(spikePercent, 1)) % spikes of \(fixed(spikeMs.low, 1))-\(fixed(spikeMs.high, 1)) ms") }
        if burstEveryS > 0 {
            parts.append("bursts of \(fixed(burstMs.low, 1))-\(fixed(burstMs.high, 1)) ms for ~\(fixed(burstLengthMs, 0)) ms every ~\(fixed(burstEveryS, 1)) s")
        }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }
}

struct Options {
    var device = "netem0"
    var peerDevice: String?
    var peerNetns = ""
    var seed: UInt64 = 1
    var lifetimeS = 3600.0
    var queueBytes = 4096 * 1024
    var readyFile: String?
    /// SCHED_FIFO where allowed; false: the default priority, as a relay not set up for real time runs.
    var realTime = true
    /// [down, up].
    var impairments = [Impairment(), Impairment()]
}

let usage = """
    usage: partycast-netem --peer-netns PATH [--dev NAME] [--peer-dev NAME] [--seed N] [--lifetime-s S]
                           [--queue-kb K] [--ready-file PATH] [--normal-priority] [[--up-|--down-]IMPAIRMENT…]
    impairments: --jitter-ms A[-B]  --keep-order  --loss PCT  --stall-ms X --stall-every-s Y  --rate-kbps R
                 --spike-pct P --spike-ms A[-B]  --burst-ms A[-B] --burst-every-s G --burst-length-ms L
    (see the comment at the top of Tools/partycast-netem/main.swift)
    """

func parseOptions(_ arguments: [String]) -> Options {
    var options = Options()
    // Overrides for one direction apply after the options for both, whatever their order.
    var general: [(String, String?)] = [], directed: [(Int, String, String?)] = []
    var i = 0
    func value(_ name: String) -> String {
        i += 1
        guard i < arguments.count else { fail("\(name) needs a value\n\(usage)") }
        return arguments[i]
    }
    while i < arguments.count {
        let argument = arguments[i]
        var name = argument, inline: String?
        if let equals = argument.firstIndex(of: "=") {
            name = String(argument[..<equals])
            inline = String(argument[argument.index(after: equals)...])
        }
        func take() -> String { inline ?? value(name) }
        switch name {
        case "-h", "--help": say(usage); exit(0)
        case "--dev": options.device = take()
        case "--peer-dev": options.peerDevice = take()
        case "--peer-netns": options.peerNetns = take()
        case "--seed": guard let seed = UInt64(take()) else { fail("--seed takes a whole number") }; options.seed = seed
        case "--lifetime-s":
            guard let s = Double(take()), s > 0, s <= 86_400 else { fail("--lifetime-s takes seconds, 0 < S ≤ 86400") }
            options.lifetimeS = s
        case "--queue-kb":
            guard let kb = Int(take()), kb > 0, kb <= 1 << 20 else { fail("--queue-kb takes 1…1048576") }
            options.queueBytes = kb * 1024
        case "--ready-file": options.readyFile = take()
        case "--normal-priority": options.realTime = false
        default:
            var bare = name, direction: Int?
            if name.hasPrefix("--down-") { direction = 0; bare = "--" + name.dropFirst(7) }
            if name.hasPrefix("--up-") { direction = 1; bare = "--" + name.dropFirst(5) }
            guard ["--jitter-ms", "--keep-order", "--loss", "--stall-ms", "--stall-every-s", "--rate-kbps", "--spike-pct", "--spike-ms",
                   "--burst-ms", "--burst-every-s", "--burst-length-ms"].contains(bare) else {
                fail("unknown option \(argument)\n\(usage)")
            }
            let v: String? = bare == "--keep-order" ? nil : take()
            if let direction { directed.append((direction, bare, v)) } else { general.append((bare, v)) }
        }
        i += 1
    }
    guard !options.peerNetns.isEmpty else { fail("--peer-netns is required\n\(usage)") }
    for (name, v) in general { for d in 0..<2 { apply(name, v, to: &options.impairments[d]) } }
    for (d, name, v) in directed { apply(name, v, to: &options.impairments[d]) }
    for (d, impairment) in options.impairments.enumerated() {
        let which = d == 0 ? "down" : "up"
        guard (impairment.stallMs > 0) == (impairment.stallEveryS > 0) else {
            fail("\(which): --stall-ms and --stall-every-s go together")
        }
        guard impairment.stallMs < impairment.stallEveryS * 1000 || impairment.stallMs == 0 else {
            fail("\(which): a stall must be shorter than its period")
        }
        guard (impairment.spikePercent > 0) == (impairment.spikeMs.high > 0) else {
            fail("\(which): --spike-pct and --spike-ms go together")
        }
        guard [impairment.burstEveryS > 0, impairment.burstLengthMs > 0, impairment.burstMs.high > 0].allSatisfy({ $0 })
                || [impairment.burstEveryS, impairment.burstLengthMs, impairment.burstMs.high].allSatisfy({ $0 == 0 }) else {
            fail("\(which): --burst-ms, --burst-every-s and --burst-length-ms go together")
        }
    }
    return options
}

/// A-B or A, in ms.
func range(_ name: String, _ value: String?) -> (low: Double, high: Double) {
    let parts = (value ?? "").split(separator: "-", omittingEmptySubsequences: false).map { Double($0) }
    guard (1...2).contains(parts.count), let low = parts[0], let high = parts.count == 2 ? parts[1] : low,
          low >= 0, low <= high, high <= 10_000 else { fail("\(name) takes A-B (0 ≤ A ≤ B ≤ 10000) or A") }
    return (low, high)
}

func apply(_ name: String, _ value: String?, to impairment: inout Impairment) {
    func number(_ low: Double, _ high: Double) -> Double {
        guard let value, let x = Double(value), x >= low, x <= high else { fail("\(name) takes a number in \(fixed(low, 0))…\(fixed(high, 0))") }
        return x
    }
    switch name {
    case "--jitter-ms": impairment.jitterMs = range(name, value)
    case "--spike-pct": impairment.spikePercent = number(0, 100)
    case "--spike-ms": impairment.spikeMs = range(name, value)
    case "--burst-ms": impairment.burstMs = range(name, value)
    case "--burst-every-s": impairment.burstEveryS = number(0.001, 3600)
    case "--burst-length-ms": impairment.burstLengthMs = number(0.001, 60_000)
    case "--keep-order": impairment.keepOrder = true
    case "--loss": impairment.lossPercent = number(0, 100)
    case "--stall-ms": impairment.stallMs = number(0, 60_000)
    case "--stall-every-s": impairment.stallEveryS = number(0, 3600)
    case "--rate-kbps": impairment.rateKbps = number(1, 10_000_000)
    default: fail("unknown option \(name)")
    }
}

import ArgumentParser
import PartyCastBroadcast
import PartyCastCodec
import PartyCastCore
import PartyCastDecoder
import PartyCastDiscovery
import PartyCastSources
import PartyCastWire
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

@main
struct BroadcasterCLI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcaster",
        abstract: "Shares audio with every PartyCast listener on the LAN.",
        subcommands: [Share.self])
}

extension Codec: ExpressibleByArgument {}

struct Share: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode the sources in order, encode once, and stream to every listener that joins.")

    @Argument(help: "MP3 files and/or tone:FREQ[:SECONDS] generators, played in order.")
    var sources: [String]

    @Option(help: "The name listeners see and join by (default: \"PartyCast on HOST\").")
    var name: String?

    @Option(help: "TCP port (0 picks a free one).")
    var port = 7360

    @Option(help: "opus (48 kHz, 20 ms packets) or pcm (lossless Float32 at the first source's rate).")
    var codec: Codec = .opus

    @Option(help: "Opus bitrate in kbit/s.")
    var bitrate = 128

    @Option(name: .customLong("start-in"), help: "Start playback this many seconds after launch, so early joiners all start at the first sample.")
    var startIn = 1.0

    @Option(help: "Milliseconds of audio sent ahead of playback: the network stall every listener rides out (see README).")
    var buffer = 1000

    @Flag(help: "Start over after the last source.")
    var loop = false

    @Flag(name: .customLong("no-mdns"), help: "Do not advertise over mDNS; listeners must use --host.")
    var noMDNS = false

    func validate() throws {
        guard !sources.isEmpty else { throw ValidationError("give at least one source") }
        guard startIn >= 0, startIn <= 3600 else { throw ValidationError("--start-in must be 0…3600 seconds") }
        // Below ~150 ms a listener's own output latency (ALSA's is 100 ms) would eat the margin.
        guard (150...10_000).contains(buffer) else { throw ValidationError("--buffer must be 150…10000 ms") }
    }

    func run() throws {
        let host = localHostName()
        var options = BroadcastOptions(name: name ?? "PartyCast on \(host)")
        options.codec = codec
        options.bitrateKbps = bitrate
        options.startInSeconds = startIn
        options.leadMilliseconds = buffer
        options.loop = loop
        let factories = try sources.map { spec -> (label: String, open: Broadcaster.SourceFactory) in
            if spec.hasPrefix("tone:") {
                _ = try ToneGenerator(spec: String(spec.dropFirst(5)))  // reject a bad spec before going live
                return (spec, { () throws(PartyCastError) -> PCMSource in try ToneGenerator(spec: String(spec.dropFirst(5))) })
            }
            _ = try FileByteSource(path: spec)
            let label = String(spec.split(separator: "/").last ?? Substring(spec))
            return (label, { () throws(PartyCastError) -> PCMSource in try MP3Source(bytes: FileByteSource(path: spec)) })
        }
        let fanout = Fanout(log: log)
        let broadcaster = Broadcaster(sources: factories, options: options, fanout: fanout)
        let server = try BroadcastServer(host: "0.0.0.0", port: port, fanout: fanout, welcome: broadcaster.welcome, log: log)
        defer { server.shutdown() }
        var publisher: ServicePublisher?
        let txt = ["proto": "\(partyCastProtocolVersion)", "codec": codec.rawValue, "id": String(broadcaster.sessionID, radix: 16)]
        if !noMDNS {
            do throws(PartyCastError) {
                publisher = try ServicePublisher(name: options.name, port: server.port, txt: txt.merging(["listeners": "0"]) { $1 }) { event in
                    log("mDNS: \(event)")
                }
            } catch {
                log("warning: not advertising over mDNS (\(error.message)); listeners can still join with --host \(host):\(server.port)")
            }
        }
        log("broadcasting \"\(options.name)\" on \(host):\(server.port) (\(codec == .opus ? "opus \(bitrate) kbit/s" : "pcm"))")
        installInterruptHandler()
        let advertised = publisher
        let display = StatusDisplay(name: options.name, endpoint: "\(host):\(server.port)", broadcaster: broadcaster, fanout: fanout,
                                    interrupted: { interrupted.load(ordering: .relaxed) },
                                    everySecond: { advertised?.update(txt: txt.merging(["listeners": "\(fanout.peers.count)"]) { $1 }) })
        let finished: Bool
        do {
            finished = try broadcaster.run()
        } catch {
            display.finish()
            broadcaster.sayGoodbye("the broadcaster failed: \(error.message)")
            log("broadcaster: \(error)")
            throw ExitCode(error.code.exitStatus)
        }
        display.finish()
        broadcaster.sayGoodbye(finished ? "the broadcast is over" : "the broadcaster was stopped")
        publisher?.stop()
        log(finished ? "the broadcast is over; \(fanout.everJoined) listener(s) joined" : "stopped; said goodbye to every listener")
    }
}

func log(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

/// Set by SIGINT/SIGTERM: the status thread turns it into a goodbye to every listener.
let interrupted = Atomic<Bool>(false)

func installInterruptHandler() {
    signal(SIGINT) { _ in interrupted.store(true, ordering: .relaxed) }
    signal(SIGTERM) { _ in interrupted.store(true, ordering: .relaxed) }
    signal(SIGPIPE, SIG_IGN)
}

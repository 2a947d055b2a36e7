// A tiny driver for PartyCastDiscovery, for the LAN harness (scripts/lan) and for poking at mDNS:
//   partycast-mdns-probe publish NAME PORT [key=value...]
//       publishes until SIGTERM/SIGINT, printing one event per line:
//       established<TAB>NAME | renamed<TAB>NAME | daemonUnavailable<TAB>WHY | failed<TAB>WHY, then "stopped"
//   partycast-mdns-probe browse SECONDS
//       prints each service found as name<TAB>host<TAB>address<TAB>port<TAB>key=value,... (keys sorted)
import PartyCastCore
import PartyCastDiscovery
#if canImport(Glibc)
import Glibc
#endif

/// One whole line with one write(2), so lines from avahi's thread never interleave.
func say(_ line: String, to fd: Int32 = STDOUT_FILENO) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

func fail(_ error: PartyCastError) -> Never {
    say("partycast-mdns-probe: \(error)", to: STDERR_FILENO)
    exit(error.code.exitStatus)
}

let usage = "usage: partycast-mdns-probe publish NAME PORT [key=value...] | browse SECONDS"
let arguments = Array(CommandLine.arguments.dropFirst())

switch (arguments.first, arguments.count) {
case ("publish", 3...):
    guard let port = Int(arguments[2]) else { fail(PartyCastError(.invalidArgument, "PORT must be a number, not \"\(arguments[2])\"")) }
    var txt: [String: String] = [:]
    for pair in arguments.dropFirst(3) {
        guard let equals = pair.firstIndex(of: "=") else { fail(PartyCastError(.invalidArgument, "TXT records are key=value, not \"\(pair)\"")) }
        txt[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
    }
    // Blocked before avahi's thread exists, so that it inherits the mask and sigwait below gets them.
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGTERM)
    sigaddset(&signals, SIGINT)
    pthread_sigmask(SIG_BLOCK, &signals, nil)
    let publisher: ServicePublisher
    do throws(PartyCastError) {
        publisher = try ServicePublisher(name: arguments[1], port: port, txt: txt) { event in
            switch event {
            case .established(let name): say("established\t\(name)")
            case .renamed(let name): say("renamed\t\(name)")
            case .daemonUnavailable(let why): say("daemonUnavailable\t\(why)")
            case .failed(let why): say("failed\t\(why)")
            }
        }
    } catch {
        fail(error)
    }
    var received: Int32 = 0
    sigwait(&signals, &received)
    publisher.stop()
    say("stopped")

case ("browse", 2):
    guard let seconds = Double(arguments[1]) else { fail(PartyCastError(.invalidArgument, "SECONDS must be a number, not \"\(arguments[1])\"")) }
    do throws(PartyCastError) {
        for service in try ServiceBrowser.browse(timeout: seconds) {
            let txt = service.txt.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            say([service.name, service.hostName, service.address, "\(service.port)", txt].joined(separator: "\t"))
        }
    } catch {
        fail(error)
    }

default:
    say(usage, to: STDERR_FILENO)
    exit(1)
}

import ArgumentParser
import PartyCastCLI
import PartyCastOutput

/// `listener devices`: the names `--output alsa:NAME` takes, each with its description below it,
/// as `aplay -L` prints them.
struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the ALSA playback devices (as `aplay -L` does): the NAMEs --output alsa:NAME takes.")

    @OptionGroup var logging: LoggingOptions

    func run() throws {
        _ = logging.bootstrap(program: "listener")
        let devices: [ALSADevice]
        do { devices = try ALSAOutput.playbackDevices() } catch { throw exitFailing(error, program: "listener") }
        for device in devices {
            Console.output(device.name)
            if let description = device.description {
                Console.output(description.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(separator: "\n"))
            }
        }
    }
}

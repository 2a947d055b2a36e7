import Foundation

/// An internet radio station for the tests: Debian's icecast2 fed by ezstream, configured in a
/// directory of its own. `tracks` play in a loop, each titled "Track N" (N its place in the list, from
/// 1); the playlist program logs when each track starts, so the time a title takes to reach a
/// listener can be measured. The caller runs `icecast` and `ezstream` (on this machine or on a LAN
/// host) and stops them by PID.
public struct IcecastStation {
    public static let name = "PartyCast Test FM"
    public static let mount = "/live.mp3"
    /// icecast2's line once it accepts connections.
    public static let serving = "server started"
    /// ezstream's line (with -v) once icecast has taken it as the mount's source: the station is on air.
    public static let onAir = "connected: "

    public let directory: String
    public let address: String
    public let port: Int
    public var url: String { "http://\(address):\(port)\(Self.mount)" }
    public var icecast: [String] { ["icecast2", "-c", "\(directory)/icecast.xml"] }
    public var ezstream: [String] { ["ezstream", "-v", "-c", "\(directory)/ezstream.xml"] }

    /// A track start the playlist program logged: the title from then on, and when (wall clock, s).
    public struct Change {
        public let title: String
        public let at: Double
    }

    /// Writes the configurations and programs into `directory` for a station on `address`:`port`.
    /// - Parameter metadataInterval: bytes between the points where icecast2 may put a new title in
    ///   a listener's stream (icy-metaint); nil for its default, 16000 (1 s of a 128 kb/s stream).
    public init(directory: String, address: String, port: Int, tracks: [String], metadataInterval: Int? = nil) throws {
        (self.directory, self.address, self.port) = (directory, address, port)
        // icecast refuses to run as root; as root it drops to nobody, who must reach the directory.
        chmod(directory, 0o777)
        let root = getuid() == 0 ? "<changeowner><user>nobody</user><group>nogroup</group></changeowner>" : ""
        let mount = metadataInterval.map { "<mount><mount-name>\(Self.mount)</mount-name><mp3-metadata-interval>\($0)</mp3-metadata-interval></mount>" } ?? ""
        try """
            <icecast>
              <limits><sources>2</sources><burst-size>0</burst-size></limits>
              <authentication><source-password>partycast</source-password><admin-user>admin</admin-user><admin-password>partycast</admin-password></authentication>
              <hostname>\(address)</hostname>
              <listen-socket><port>\(port)</port><bind-address>\(address)</bind-address></listen-socket>
              <paths><basedir>\(directory)</basedir><logdir>\(directory)</logdir><webroot>/usr/share/icecast2/web</webroot><adminroot>/usr/share/icecast2/admin</adminroot></paths>
              <logging><errorlog>-</errorlog><accesslog>access.log</accesslog><loglevel>3</loglevel></logging>
              <security><chroot>0</chroot>\(root)</security>\(mount)
            </icecast>
            """.write(toFile: "\(directory)/icecast.xml", atomically: true, encoding: .utf8)
        // Next track: counts 1, 2, …, N, 1…, logs the start time; the metadata program names it.
        let paths = tracks.map { "'\($0)'" }.joined(separator: " ")
        try """
            #!/bin/sh
            d=\(directory); n=$(cat $d/counter 2>/dev/null || echo 0); n=$((n % \(tracks.count) + 1)); echo $n > $d/counter
            echo "$(date +%s.%N) Track $n" >> $d/changes.log
            set -- \(paths); shift $((n - 1)); echo "$1"
            """.write(toFile: "\(directory)/next.sh", atomically: true, encoding: .utf8)
        try """
            #!/bin/sh
            case "$1" in ""|title) echo "Track $(cat \(directory)/counter)";; *) echo;; esac
            """.write(toFile: "\(directory)/meta.sh", atomically: true, encoding: .utf8)
        chmod("\(directory)/next.sh", 0o755)
        chmod("\(directory)/meta.sh", 0o755)
        try """
            <ezstream>
              <servers><server><hostname>\(address)</hostname><port>\(port)</port><password>partycast</password></server></servers>
              <streams><stream><mountpoint>\(Self.mount)</mountpoint><format>MP3</format><stream_name>\(Self.name)</stream_name></stream></streams>
              <intakes><intake><type>program</type><filename>\(directory)/next.sh</filename></intake></intakes>
              <metadata><program>\(directory)/meta.sh</program><format_str>@t@</format_str></metadata>
            </ezstream>
            """.write(toFile: "\(directory)/ezstream.xml", atomically: true, encoding: .utf8)
        chmod("\(directory)/ezstream.xml", 0o600)  // ezstream refuses a config others can write
    }

    /// Every track start so far, in order.
    public func changes() -> [Change] {
        let log = (try? String(contentsOfFile: "\(directory)/changes.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let at = Double(parts[0]) else { return nil }
            return Change(title: String(parts[1]), at: at)
        }
    }
}

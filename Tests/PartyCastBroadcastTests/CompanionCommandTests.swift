import Foundation
@testable import PartyCastBroadcast
import PartyCastControlSeam
import PartyCastCore
import Synchronization
import XCTest

/// The party following the player behind its first source (mpd behind a pipe, here a recording
/// companion in front of the ramps): what the player reports is what the remotes show and the
/// listeners are told, at the timeline position its audio is on; its pause is the party's pause;
/// and the transport commands go to the player instead of the party's queue.
extension PartyCommandTests {
    /// Answers every command with the report it was given, and keeps the commands.
    final class RecordingCompanion: SourceCompanion {
        let commands = Mutex<[PartyCommand]>([])
        let answer: SourceReport
        init(answering answer: SourceReport) { self.answer = answer }

        func forward(_ command: PartyCommand, completion: @escaping @Sendable (Result<SourceReport, PartyCommandError>) -> Void) {
            commands.withLock { $0.append(command) }
            completion(.success(answer))
        }
    }

    func makeCompanionParty(_ companion: any SourceCompanion) {
        makeParty([0, 1_000_000].map { base in
            ResolvedSource(spec: "ramp:\(base)", label: "ramp", isLive: false, open: { () throws(PartyCastError) -> PCMSource in RampSource(base: Float(base)) })
        }, companion: companion)
    }

    static func report(playing: Bool = true, song: Int = 7, title: String = "Blue", elapsed: Double) -> SourceReport {
        SourceReport(playing: playing, song: song, tags: TrackTags(title: title, artist: "Band"), elapsedSeconds: elapsed, durationSeconds: 200, cover: nil)
    }

    /// Applies a report as the pacer does, keeps the answer, and reads what was sent.
    func follow(_ report: SourceReport) throws {
        switch party.answer(.companion(report, unsolicited: false)) {
        case .success(let snapshot): answered = snapshot
        case .failure(let refusal): XCTFail("refused: \(refusal.message)")
        }
        try pump()
    }

    func testTheCompanionsSongIsShownAtOnceAndToldWhereItsAudioIs() throws {
        makeCompanionParty(RecordingCompanion(answering: Self.report(elapsed: 0)))
        try startAndPlay()
        let end = party.state.timeline.end + UInt64(party.state.pending.count)
        try follow(Self.report(elapsed: 30))
        XCTAssertEqual(answered?.queue.first?.title, "Blue")
        XCTAssertEqual(answered?.queue.first?.artist, "Band")
        XCTAssertEqual(answered?.queue.first?.durationSeconds, 200)
        XCTAssertEqual(answered?.elapsedSeconds, 30, "the answer is the party as of the player's now")
        // (Sent twice, as a station's titles are: broadcast, and again in the preamble every listener is sent.)
        XCTAssertEqual(Set(listener.metadata.map { [$0.startPosition, $0.songFrame] }), [[end, 30 * 48000]], "after what was sent")
        XCTAssertEqual(listener.metadata.last?.title, "Blue")
        XCTAssertTrue(listener.withdrawals.isEmpty, "a live source's audio is not taken back")

        // Half a second on, the player where it should be: nothing to tell.
        clock.advance(milliseconds: 500)
        try pump()
        let told = listener.metadata.count
        try follow(Self.report(elapsed: 30.5))
        XCTAssertEqual(listener.metadata.count, told)
        // A seek: the player jumped.
        try follow(Self.report(elapsed: 90))
        XCTAssertEqual(listener.metadata.last?.songFrame, 90 * 48000)
        XCTAssertEqual(answered?.elapsedSeconds, 90)
    }

    func testThePlayersPauseIsThePartysAndASkipMeanwhileStartsTheNextSong() throws {
        makeCompanionParty(RecordingCompanion(answering: Self.report(elapsed: 0)))
        try startAndPlay()
        try follow(Self.report(elapsed: 10))
        clock.advance(milliseconds: 1000)
        try pump()
        let cut = expectedCut()
        try follow(Self.report(playing: false, elapsed: 11))
        XCTAssertEqual(listener.withdrawals, [cut], "a fade to the cut, as the party's own pause")
        XCTAssertEqual(listener.pausedStates.last, true)
        XCTAssertTrue(answered?.paused == true)

        // Skipped while paused: the resume starts the new song where the player is.
        try follow(Self.report(playing: false, song: 8, title: "Green", elapsed: 0))
        XCTAssertEqual(answered?.queue.first?.title, "Green")
        XCTAssertEqual(answered?.elapsedSeconds, 0)
        clock.advance(milliseconds: 2000)
        try follow(Self.report(playing: true, song: 8, title: "Green", elapsed: 0))
        XCTAssertEqual(listener.pausedStates.last, false)
        XCTAssertEqual(listener.metadata.last.map { [$0.songFrame] }, [0])
        XCTAssertEqual(listener.metadata.last?.title, "Green")
        XCTAssertFalse(answered?.paused ?? true)
    }

    func testACoverComesWithTheReportAndGoesWithTheNext() throws {
        makeCompanionParty(RecordingCompanion(answering: Self.report(elapsed: 0)))
        try startAndPlay()
        var report = Self.report(elapsed: 1)
        report.cover = CoverArt(mimeType: "image/png", pictureType: 3, bytes: [0x89, 0x50, 0x4E, 0x47])
        try follow(report)
        XCTAssertEqual(answered?.queue.first?.hasCover, true)
        XCTAssertEqual(party.cover(item: 1)?.bytes, [0x89, 0x50, 0x4E, 0x47])
        let shown = try XCTUnwrap(answered?.queue.first?.coverRevision)
        try follow(Self.report(song: 8, elapsed: 0))
        XCTAssertEqual(answered?.queue.first?.hasCover, false)
        XCTAssertNil(party.cover(item: 1))
        // The next song's picture, under the same item: a new revision, so no cache shows the old one.
        var next = Self.report(song: 9, elapsed: 0)
        next.cover = CoverArt(mimeType: "image/jpeg", pictureType: 3, bytes: [0xFF, 0xD8, 0xFF])
        try follow(next)
        XCTAssertEqual(party.cover(item: 1)?.bytes, [0xFF, 0xD8, 0xFF])
        XCTAssertNotEqual(answered?.queue.first?.coverRevision, shown)
        XCTAssertEqual(answered?.queue.first?.id, 1)
        let again = answered?.queue.first?.coverRevision
        next.elapsedSeconds = 0.5
        try follow(next)
        XCTAssertEqual(answered?.queue.first?.coverRevision, again, "the same picture: the same revision")
    }

    /// A seek the party would refuse never reaches the player: mpd reads `seekcur -5` as 5 s back,
    /// and a huge one overflows its float.
    func testAnInvalidSeekIsRefusedBeforeThePlayer() async throws {
        let companion = RecordingCompanion(answering: Self.report(elapsed: 0))
        makeCompanionParty(companion)
        try startAndPlay()
        for seconds in [-5, .infinity, .nan, 1e300, 86_400] {
            let outcome = await party.perform(.seek(seconds: seconds))
            guard case .failure(let refusal) = outcome else { return XCTFail("seek \(seconds) accepted") }
            XCTAssertEqual(refusal.kind, .invalid, "\(seconds): \(refusal.message)")
        }
        XCTAssertEqual(companion.commands.withLock { $0 }, [], "none forwarded")
        let sought = await performAsThePacer(.seek(seconds: 20))
        XCTAssertNoThrow(try sought.get())
        XCTAssertEqual(companion.commands.withLock { $0 }, [.seek(seconds: 20)])
    }

    /// A player reporting without end: at most one of its reports waits for the pacer, the newest.
    func testAReportStormKeepsOnlyTheNewestReport() async throws {
        makeCompanionParty(RecordingCompanion(answering: Self.report(elapsed: 0)))
        try startAndPlay()
        for elapsed in 0..<1000 { party.companionReported(Self.report(elapsed: Double(elapsed))) }
        let waiting = party.inbox.withLockedValue { $0.map(\.0) }
        XCTAssertEqual(waiting.count, 1)
        guard case .companion(let report, unsolicited: true)? = waiting.first else { return XCTFail("\(waiting)") }
        XCTAssertEqual(report.elapsedSeconds, 999)
        party.applyCommands()
        XCTAssertEqual(party.snapshot.elapsedSeconds, 999, accuracy: 0.01)
        XCTAssertTrue(party.inbox.withLockedValue { $0.isEmpty })
    }

    /// `next` goes to the player, and the answer is the party after the player's report of it;
    /// the party's own commands stay the party's.
    func testTransportCommandsGoToThePlayer() async throws {
        let companion = RecordingCompanion(answering: Self.report(playing: false, song: 9, title: "Red", elapsed: 0))
        makeCompanionParty(companion)
        try startAndPlay()
        let snapshot = try await performAsThePacer(.next).get()
        XCTAssertEqual(companion.commands.withLock { $0 }, [.next])
        XCTAssertEqual(snapshot.queue.first?.title, "Red")
        XCTAssertTrue(snapshot.paused)
        XCTAssertEqual(party.snapshot.current, 1, "the party's own queue did not move")

        let volume = try await performAsThePacer(.partyVolume(percent: 50)).get()
        XCTAssertEqual(volume.volume, 50)
        XCTAssertEqual(companion.commands.withLock { $0 }, [.next], "not a transport command")
    }

    /// A remote's command through `perform`, applied as the pacer applies what its inbox holds.
    func performAsThePacer(_ command: PartyCommand) async -> Result<PartySnapshot, PartyCommandError> {
        let party = self.party!
        let asked = Task { await party.perform(command) }
        // The request (the companion's report of it, for a transport command) reaches the inbox, which wakes the pacer.
        party.wakeup.wait(nanoseconds: 5_000_000_000)
        party.applyCommands()
        return await asked.value
    }
}

@testable import PartyCastBroadcast
import PartyCastControlSeam
import XCTest

/// What a command answers: the party as it is once the change is heard, at the cut a control margin
/// and a fade from now, not what is still heard until then (the README promises `ctl next` prints
/// the new song; the answer used to name the song being skipped, 0.5 s in).
extension PartyCommandTests {
    /// The song and position a snapshot tells of.
    func playing(_ snapshot: PartySnapshot?) -> [Double] {
        [Double(snapshot?.current ?? -1), snapshot?.elapsedSeconds ?? -1]
    }

    func seconds(_ frames: UInt64) -> Double { Double(frames) / Double(Self.rate) }

    /// Subscribers (the remotes, Sendspin's metadata and artwork clients) are told when the first
    /// song starts being heard. The pacer republishes when the song heard changes, and once took it
    /// to be heard from before the origin, where the snapshots show none: a client that joined in
    /// that second was told of no song and then never of the first (SendspinPlayerTests' artwork
    /// client waited 30 s, in CI and 10 of 10 times when it joined at once).
    func testTheFirstSongIsPublishedWhenItStartsBeingHeard() throws {
        XCTAssertTrue(try party.start())
        try pump()
        party.pruneHeard()
        XCTAssertNil(party.snapshot.current, "nothing is heard before the origin")
        clock.advance(milliseconds: 1500)
        try pump()
        let told = party.snapshot.revision
        party.pruneHeard()
        XCTAssertEqual(playing(party.snapshot), [1, 0.5])
        XCTAssertGreaterThan(party.snapshot.revision, told, "the subscribers were told")
    }

    func testNextAnswersTheNextSongAtItsStart() throws {
        try startAndPlay()
        XCTAssertEqual(playing(party.snapshot), [1, 0.5], "before: half a second of the first song")
        let cut = expectedCut()
        XCTAssertNil(try command(.next))
        XCTAssertEqual(playing(answered), [2, 0])
        XCTAssertEqual(playing(party.snapshot), [2, 0], "what the remotes read next agrees")
        clock.advance(milliseconds: 100)
        XCTAssertEqual(playing(party.snapshot), [2, 0], "the cut is not heard yet: no step back to the old song")
        clock.advance(milliseconds: 500)
        XCTAssertEqual(playing(party.snapshot), [2, seconds(party.state.timeline.position(at: clock.now) - cut)], "counting on from the cut")
    }

    func testSeekAnswersThePositionSoughtTo() throws {
        try startAndPlay()
        XCTAssertNil(try command(.seek(seconds: 5)))
        XCTAssertEqual(playing(answered), [1, 5])
        XCTAssertEqual(playing(party.snapshot), [1, 5])
        clock.advance(milliseconds: 50)
        XCTAssertNil(try command(.seek(seconds: 0.25)), "back, before the first seek is heard")
        XCTAssertEqual(playing(answered), [1, 0.25])
    }

    func testPreviousAnswersTheSongItGoesBackTo() throws {
        try startAndPlay()
        XCTAssertNil(try command(.next))
        clock.advance(milliseconds: 1000)
        try pump()
        XCTAssertNil(try command(.previous))
        XCTAssertEqual(playing(answered), [1, 0], "1 s into the second song: back to the first")
        clock.advance(milliseconds: 4000)
        try pump()
        XCTAssertNil(try command(.previous))
        XCTAssertEqual(playing(answered), [1, 0], "over 3 s into a song: it starts again")
    }

    /// A second command before the first is heard acts on what the first answered.
    func testACommandBuildsOnOneNotHeardYet() throws {
        try startAndPlay()
        XCTAssertNil(try command(.next))
        XCTAssertNil(try command(.seek(seconds: 2)), "at once: the seek is in the next song")
        XCTAssertEqual(playing(answered), [2, 2])
        XCTAssertEqual(try command(.next)?.kind, .invalid, "the song skipped to is the last")
        clock.advance(milliseconds: 500)
        try pump()
        XCTAssertEqual(listener.samples(from: party.state.timeline.segments.last!.position, count: 1), [1_000_000 + 96000], "heard: the next song from 2 s")
    }

    func testPlayAnswersTheItemChosen() throws {
        try startAndPlay()
        XCTAssertNil(try command(.play(item: 2)))
        XCTAssertEqual(playing(answered), [2, 0])
        XCTAssertEqual(answered?.paused, false)
    }

    func testResumeAnswersThePositionPausedOn() throws {
        try startAndPlay()
        let cut = expectedCut()
        XCTAssertNil(try command(.pause))
        XCTAssertEqual(answered?.paused, true)
        XCTAssertEqual(playing(answered), [1, seconds(cut)])
        XCTAssertNil(try command(.next), "paused: the next song waits for the resume")
        XCTAssertEqual(playing(answered), [2, 0])
        XCTAssertEqual(answered?.paused, true)
        clock.advance(milliseconds: 3000)
        XCTAssertNil(try command(.resume))
        XCTAssertEqual(answered?.paused, false)
        XCTAssertEqual(playing(answered), [2, 0])
    }
}

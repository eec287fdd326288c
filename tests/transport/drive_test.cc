// Endpoint::Drive (EndpointOptions::drivable) over real UDP on loopback: a caller runs its
// request and answer on its own thread; the loop thread, parked meanwhile and after, wakes for a
// post, for a waiter counted by AwaitingAnswers and for Stop; one caller drives at a time; an
// endpoint that is not drivable, or shares a loop, is never driven. Every drivable dialer here
// parks for an hour after a drive, so a loop thread that is not woken would never serve again:
// the waits below (kWait) end on the event, not on a park running out (Stop always wakes it).
// Endpoint::PostWithoutUnpark and Endpoint::DriveOneTurn (a fire-and-forget publisher writing
// its own batches) are checked here too.
#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "transport_test_util.h"

namespace felix::transport {
namespace {

using namespace felix::transport::test;

constexpr auto kLongPark = std::chrono::hours(1);

TlsOptions ServerTls() {
  TlsOptions o;
  o.role = Role::kClient;  // the broker's client port
  return o;
}

TlsOptions DialTls() {
  TlsOptions o;
  o.role = Role::kClient;
  return o;
}

std::unique_ptr<Endpoint> DrivableDialer(
    MetricsRegistry& metrics,
    std::chrono::microseconds park =
        std::chrono::duration_cast<std::chrono::microseconds>(kLongPark)) {
  EndpointOptions o;
  o.drivable = true;
  o.drive_park = park;
  return MakeDialer(MakeTls(DialTls()), metrics, o);
}

std::chrono::steady_clock::time_point Deadline() {
  return std::chrono::steady_clock::now() + kWait;
}

// A listener that echoes what arrives on a stream at once, except a request "hold", which it
// answers "held" only when Release() is called.
class HoldingEcho {
 public:
  explicit HoldingEcho(MetricsRegistry& metrics) {
    ListenHandlers lh;
    lh.on_connection = [this](const std::shared_ptr<Connection>& c) {
      c->SetHandlers(ConnectionHandlers{
          [this](const std::shared_ptr<Stream>& s) {
            std::weak_ptr<Stream> weak = s;
            s->SetHandlers(StreamHandlers{[this, weak](Stream& st, std::span<const uint8_t> d) {
                                            const std::string got(
                                                reinterpret_cast<const char*>(d.data()), d.size());
                                            st.Consume(d.size());
                                            if (got == "hold") {
                                              held_ = weak.lock();
                                            } else {
                                              (void)st.Write(d);
                                            }
                                          },
                                          nullptr, nullptr, nullptr});
          },
          nullptr});
    };
    EndpointOptions o;
    o.tls = MakeTls(ServerTls());
    o.name = "server";
    auto r = Endpoint::Create(Loopback(), o, metrics, std::move(lh));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    ep = std::move(*r);
  }
  // Answers the held request once the server has it (sent with, or before, the drive's own
  // request; asked again while it is still on its way).
  bool Release() {
    for (auto until = std::chrono::steady_clock::now() + kWait;
         std::chrono::steady_clock::now() < until;) {
      const bool sent = OnLoop(*ep, [this] {
        if (!held_) return false;
        const std::string held = "held";
        (void)held_->Write(std::span(reinterpret_cast<const uint8_t*>(held.data()), held.size()));
        return true;
      });
      if (sent) return true;
      std::this_thread::yield();
    }
    return false;
  }

 private:
  std::shared_ptr<Stream> held_;  // loop thread; declared first: the endpoint stops first

 public:
  std::unique_ptr<Endpoint> ep;
};

// What a dialer's stream received, and on which thread its handler ran.
struct Received {
  std::mutex mu;
  std::string bytes;
  std::thread::id thread;
};

std::shared_ptr<Stream> OpenCollecting(Endpoint& dialer, const std::shared_ptr<Connection>& conn,
                                       std::shared_ptr<Received> into) {
  return OnLoop(dialer, [&]() -> std::shared_ptr<Stream> {
    auto s = conn->OpenBidiStream();
    if (!s) return nullptr;
    (*s)->SetHandlers(StreamHandlers{[into](Stream& st, std::span<const uint8_t> d) {
                                       std::lock_guard lock(into->mu);
                                       into->bytes.append(reinterpret_cast<const char*>(d.data()),
                                                          d.size());
                                       into->thread = std::this_thread::get_id();
                                       st.Consume(d.size());
                                     },
                                     nullptr, nullptr, nullptr});
    return *s;
  });
}

void Write(const std::shared_ptr<Stream>& s, const std::string& text) {
  (void)s->Write(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

bool Got(const std::shared_ptr<Received>& r, const std::string& want) {
  std::lock_guard lock(r->mu);
  return r->bytes == want;
}

// Whether `r` holds `want` within kWait.
bool Arrives(const std::shared_ptr<Received>& r, const std::string& want) {
  const auto until = std::chrono::steady_clock::now() + kWait;
  while (!Got(r, want)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

// An echo server and a drivable dialer, with one collecting stream open between them (Open).
struct DrivenEcho {
  MetricsRegistry metrics;
  EchoServer server{MakeTls(ServerTls()), metrics};
  std::unique_ptr<Endpoint> dialer = DrivableDialer(metrics);
  std::shared_ptr<Received> got = std::make_shared<Received>();
  std::shared_ptr<Stream> stream;

  bool Open() {
    if (!dialer) return false;
    auto conn = DialAndWait(*dialer, server.addr());
    EXPECT_TRUE(conn.has_value()) << (conn ? "" : conn.error().message);
    if (!conn) return false;
    stream = OpenCollecting(*dialer, *conn, got);
    return stream != nullptr;
  }
};

TEST(EndpointDrive, ACallerWritesItsRequestAndReadsItsAnswerOnItsOwnThread) {
  DrivenEcho echo;
  ASSERT_TRUE(echo.Open());
  auto& dialer = echo.dialer;
  auto& stream = echo.stream;
  auto& got = echo.got;
  std::string want;
  for (int i = 0; i < 20; ++i) {
    const std::string request = "request " + std::to_string(i) + ";";
    want += request;
    bool start_on_loop = false;
    bool start_in_drive = false;
    bool done_in_drive = true;
    ASSERT_TRUE(dialer->Drive(
        [&] {
          start_on_loop = dialer->InLoopThread();
          start_in_drive = dialer->InDrive();
          Write(stream, request);
        },
        [&] {
          done_in_drive = done_in_drive && dialer->InDrive();
          return Got(got, want);
        },
        Deadline()));
    EXPECT_TRUE(start_on_loop) << "the driver is the loop thread while it drives";
    EXPECT_TRUE(start_in_drive && done_in_drive) << "and knows it drives";
    EXPECT_FALSE(dialer->InLoopThread()) << "and no longer after";
    EXPECT_FALSE(dialer->InDrive());
    EXPECT_FALSE(OnLoop(*dialer, [&] { return dialer->InDrive(); }))
        << "the loop thread itself never drives";
    ASSERT_TRUE(Got(got, want)) << "round " << i;
    std::lock_guard lock(got->mu);
    EXPECT_EQ(got->thread, std::this_thread::get_id()) << "the answer was read by the caller";
  }
}

TEST(EndpointDrive, APostFromAnotherThreadWakesTheParkedLoopThread) {
  DrivenEcho echo;
  ASSERT_NE(echo.dialer, nullptr);
  auto& dialer = echo.dialer;
  const std::thread::id loop = OnLoop(*dialer, [] { return std::this_thread::get_id(); });
  ASSERT_TRUE(echo.Open());
  auto& stream = echo.stream;
  auto& got = echo.got;
  ASSERT_TRUE(
      dialer->Drive([&] { Write(stream, "one"); }, [&] { return Got(got, "one"); }, Deadline()));
  // Parked for an hour now; a post must run at once, on the loop thread, and so must the
  // round trip it starts.
  EXPECT_EQ(OnLoop(*dialer, [] { return std::this_thread::get_id(); }), loop);
  dialer->Post([&] { Write(stream, "two"); });
  ASSERT_TRUE(Arrives(got, "onetwo")) << "the parked loop did not serve";
  std::lock_guard lock(got->mu);
  EXPECT_EQ(got->thread, loop);
}

// A waiter counted by AwaitingAnswers while a drive runs keeps the loop thread from parking
// once the drive ends, and one counted after it parked wakes it: either way the waiter's
// answer, which the drive did not read, arrives.
TEST(EndpointDrive, AnAnswerAwaitedByAnotherThreadArrivesAfterTheDrive) {
  for (bool counted_during_the_drive : {true, false}) {
    SCOPED_TRACE(counted_during_the_drive ? "counted during the drive" : "counted after it");
    MetricsRegistry metrics;
    HoldingEcho server(metrics);
    auto dialer = DrivableDialer(metrics);
    ASSERT_NE(dialer, nullptr);
    auto conn = DialAndWait(*dialer, server.ep->local_address());
    ASSERT_TRUE(conn.has_value()) << conn.error().message;
    auto mine = std::make_shared<Received>();
    auto theirs = std::make_shared<Received>();
    auto my_stream = OpenCollecting(*dialer, *conn, mine);
    auto their_stream = OpenCollecting(*dialer, *conn, theirs);
    ASSERT_TRUE(my_stream && their_stream);
    ASSERT_TRUE(dialer->Drive(
        [&] {
          if (counted_during_the_drive) dialer->AwaitingAnswers(+1);
          Write(their_stream, "hold");
          Write(my_stream, "ping");
        },
        [&] { return Got(mine, "ping"); }, Deadline()));
    if (!counted_during_the_drive) dialer->AwaitingAnswers(+1);
    // The server answers the held request only now, after the drive ended.
    ASSERT_TRUE(server.Release()) << "the held request never reached the server";
    EXPECT_TRUE(Arrives(theirs, "held")) << "the loop thread stayed parked";
    dialer->AwaitingAnswers(-1);
  }
}

TEST(EndpointDrive, OneCallerDrivesAtATime) {
  MetricsRegistry metrics;
  auto dialer = DrivableDialer(metrics);
  ASSERT_NE(dialer, nullptr);
  std::promise<void> driving;
  auto driving_now = driving.get_future();
  std::atomic<bool> second_tried{false};
  bool second_driven = true;
  bool second_started = false;
  std::thread second([&] {
    driving_now.wait();
    second_driven = dialer->Drive([&] { second_started = true; }, [] { return true; }, Deadline());
    second_tried = true;
    dialer->Post([] {});  // wakes the driver, asleep in its poll, to see it
  });
  EXPECT_TRUE(
      dialer->Drive([&] { driving.set_value(); }, [&] { return second_tried.load(); }, Deadline()));
  second.join();
  EXPECT_FALSE(second_driven);
  EXPECT_FALSE(second_started);
  // Nor from the loop thread itself.
  bool started = false;
  EXPECT_FALSE(OnLoop(*dialer, [&] {
    return dialer->Drive([&] { started = true; }, [] { return true; }, Deadline());
  }));
  EXPECT_FALSE(started);
}

// While another caller waits for the loop thread (counted by AwaitingAnswers), a caller does not
// take the loop over: the loop thread serves it too, instead of the loop changing hands at
// every answer when many threads share one connection. What KeepLoopAwake counts (events that
// may come) does not stop a drive; once no caller waits, callers drive again.
TEST(EndpointDrive, ACallerDoesNotDriveWhileAnotherWaitsForTheLoopThread) {
  DrivenEcho echo;
  ASSERT_TRUE(echo.Open());
  echo.dialer->AwaitingAnswers(+1);
  bool started = false;
  EXPECT_FALSE(echo.dialer->Drive([&] { started = true; }, [] { return true; }, Deadline()));
  EXPECT_FALSE(started);
  // The waiter is served by the loop thread meanwhile.
  echo.dialer->Post([&] { Write(echo.stream, "x"); });
  EXPECT_TRUE(Arrives(echo.got, "x")) << "the loop thread did not serve the waiter";
  echo.dialer->AwaitingAnswers(-1);
  echo.dialer->KeepLoopAwake(+1);
  EXPECT_TRUE(echo.dialer->Drive([&] { Write(echo.stream, "y"); },
                                 [&] { return Got(echo.got, "xy"); }, Deadline()));
  echo.dialer->KeepLoopAwake(-1);
}

TEST(EndpointDrive, AnEndpointThatIsNotDrivableOrSharesALoopIsNotDriven) {
  MetricsRegistry metrics;
  auto plain = MakeDialer(MakeTls(DialTls()), metrics);
  ASSERT_NE(plain, nullptr);
  bool started = false;
  EXPECT_FALSE(plain->Drive([&] { started = true; }, [] { return true; }, Deadline()));
  EXPECT_FALSE(started);
  // A guest may not join a drivable endpoint's loop (a driver would run the guest's work).
  auto drivable = DrivableDialer(metrics);
  ASSERT_NE(drivable, nullptr);
  EndpointOptions guest;
  guest.tls = MakeTls(DialTls());
  guest.share_loop_of = drivable.get();
  auto refused = Endpoint::Create(Loopback(), guest, metrics, std::nullopt);
  EXPECT_FALSE(refused.has_value());
  // And a drivable guest of a plain loop has no loop of its own to drive.
  guest.share_loop_of = plain.get();
  guest.drivable = true;
  auto drivable_guest = Endpoint::Create(Loopback(), guest, metrics, std::nullopt);
  ASSERT_TRUE(drivable_guest.has_value()) << drivable_guest.error().message;
  EXPECT_FALSE((*drivable_guest)->Drive([&] { started = true; }, [] { return true; }, Deadline()));
  EXPECT_FALSE(started);
}

// A function posted with PostWithoutUnpark from another thread while a caller drives.
struct PostedWithoutUnpark {
  std::atomic<bool> ran{false};
  std::thread::id ran_on;  // written before `ran`
};

// Drives once (nothing written, nothing awaited) and, while the drive is claimed, has another
// thread post `what` with PostWithoutUnpark.
bool DriveWhileAnotherThreadPostsWithoutUnpark(Endpoint& dialer, std::function<void()> what) {
  bool posted = false;
  return dialer.Drive([] {},
                      [&] {
                        if (!posted) {
                          std::thread([&] { dialer.PostWithoutUnpark(what); }).join();
                          posted = true;
                        }
                        return true;
                      },
                      Deadline());
}

// A post that does not unpark the loop thread waits for the caller that keeps the loop: it
// runs in that caller's next turn, on its thread, not on the loop thread (parked for an hour).
// Twenty rounds: a plain post in its place wakes the loop thread, which then runs it first in
// nearly every round (mutation-checked).
TEST(EndpointDrive, APostWithoutUnparkRunsInTheNextTurnOfTheCallerKeepingTheLoop) {
  DrivenEcho echo;
  ASSERT_TRUE(echo.Open());
  std::string want;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto posted = std::make_shared<PostedWithoutUnpark>();
    const std::string piece = std::to_string(round) + ";";
    ASSERT_TRUE(DriveWhileAnotherThreadPostsWithoutUnpark(*echo.dialer, [&, posted, piece] {
      posted->ran_on = std::this_thread::get_id();
      posted->ran = true;
      Write(echo.stream, piece);
    }));
    EXPECT_FALSE(posted->ran.load()) << "ran before the caller's next turn";
    ASSERT_TRUE(echo.dialer->DriveOneTurn());
    ASSERT_TRUE(posted->ran.load()) << "the turn did not run it";
    EXPECT_EQ(posted->ran_on, std::this_thread::get_id()) << "ran on the loop thread";
    // What it wrote went out: the echo comes back (read by this caller's turns).
    want += piece;
    for (auto until = Deadline(); !Got(echo.got, want) && std::chrono::steady_clock::now() < until;)
      ASSERT_TRUE(echo.dialer->DriveOneTurn());
    ASSERT_TRUE(Got(echo.got, want));
    std::lock_guard lock(echo.got->mu);
    EXPECT_EQ(echo.got->thread, std::this_thread::get_id()) << "the echo was read by the caller";
  }
}

// Nobody drives again: the loop thread runs the post once drive_park has passed since the last
// drive. Not lost, whatever the park (checked here with a short one).
TEST(EndpointDrive, APostWithoutUnparkRunsOnTheLoopThreadWhenNobodyDrivesAgain) {
  MetricsRegistry metrics;
  auto dialer = DrivableDialer(metrics, std::chrono::milliseconds(20));
  ASSERT_NE(dialer, nullptr);
  const std::thread::id loop = OnLoop(*dialer, [] { return std::this_thread::get_id(); });
  auto posted = std::make_shared<PostedWithoutUnpark>();
  ASSERT_TRUE(DriveWhileAnotherThreadPostsWithoutUnpark(*dialer, [posted] {
    posted->ran_on = std::this_thread::get_id();
    posted->ran = true;
  }));
  for (auto until = Deadline(); !posted->ran && std::chrono::steady_clock::now() < until;)
    std::this_thread::yield();
  ASSERT_TRUE(posted->ran.load()) << "never ran";
  EXPECT_EQ(posted->ran_on, loop);
}

// Where no drive keeps the loop — an endpoint nobody drove, one that is not drivable — the loop
// thread may be asleep with no deadline (no connections here): PostWithoutUnpark wakes it as
// Post does, or what it posts would never run.
TEST(EndpointDrive, APostWithoutUnparkToALoopNobodyDrivesIsAPlainPost) {
  MetricsRegistry metrics;
  auto drivable = DrivableDialer(metrics);
  auto plain = MakeDialer(MakeTls(DialTls()), metrics);
  ASSERT_TRUE(drivable && plain);
  for (Endpoint* ep : {drivable.get(), plain.get()}) {
    std::promise<std::thread::id> ran;
    auto on = ran.get_future();
    ep->PostWithoutUnpark([&] { ran.set_value(std::this_thread::get_id()); });
    ASSERT_EQ(on.wait_for(kWait), std::future_status::ready) << "the loop thread slept on";
    EXPECT_NE(on.get(), std::this_thread::get_id());
  }
}

// DriveOneTurn is refused wherever Drive is, and also while the loop thread is kept awake for
// others (KeepLoopAwake: events that may come; AwaitingAnswers: a caller waiting for it), where
// taking the loop from it at every turn would cost it a wake each time.
TEST(EndpointDrive, OneTurnIsRefusedWhileTheLoopThreadIsKeptAwakeOrWhereADriveIs) {
  MetricsRegistry metrics;
  auto dialer = DrivableDialer(metrics);
  ASSERT_NE(dialer, nullptr);
  dialer->KeepLoopAwake(+1);
  EXPECT_FALSE(dialer->DriveOneTurn());
  dialer->KeepLoopAwake(-1);
  dialer->AwaitingAnswers(+1);
  EXPECT_FALSE(dialer->DriveOneTurn());
  dialer->AwaitingAnswers(-1);
  EXPECT_TRUE(dialer->DriveOneTurn());
  EXPECT_FALSE(OnLoop(*dialer, [&] { return dialer->DriveOneTurn(); })) << "on the loop thread";
  auto plain = MakeDialer(MakeTls(DialTls()), metrics);
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->DriveOneTurn()) << "not drivable";
  dialer->Stop();
  EXPECT_FALSE(dialer->DriveOneTurn()) << "stopped";
}

// Stop wakes a loop thread parked for an hour, and a stopped endpoint is not driven.
TEST(EndpointDrive, StopEndsAParkedLoopAndLaterDrivesAreRefused) {
  DrivenEcho echo;
  ASSERT_TRUE(echo.Open());
  ASSERT_TRUE(echo.dialer->Drive([&] { Write(echo.stream, "x"); },
                                 [&] { return Got(echo.got, "x"); }, Deadline()));
  auto stopped = std::async(std::launch::async, [&] { echo.dialer->Stop(); });
  EXPECT_EQ(stopped.wait_for(kWait), std::future_status::ready) << "Stop waited for the park";
  if (stopped.wait_for(std::chrono::seconds(0)) != std::future_status::ready) std::abort();
  bool started = false;
  EXPECT_FALSE(echo.dialer->Drive([&] { started = true; }, [] { return true; }, Deadline()));
  EXPECT_FALSE(started);
}

}  // namespace
}  // namespace felix::transport

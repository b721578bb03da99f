// serve's HTTP API on loopback (httplib::Client): /api/tts gives the library's wav by GET,
// POST form, multipart or header (as Coqui's tts-server reads them); /api/mel and
// /api/durations agree with it; concurrent requests run as one batch and say what they say
// alone; every refusal has its status and a message naming the parameter or flag.
#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <numeric>
#include <string>
#include <vector>

#include "serve/request.h"
#include "serve/server.h"
#include "serve/tts_service.h"
#include "serve_test_util.h"
#include "test_util.h"
#include "tiny_checkpoint.h"
#include "train/wav.h"

namespace monoflow::serve {
namespace {

using namespace testing;
using train::testing::TempDir;

const char kHello[] = "hello world.";

class ServeApi : public train::testing::SharedCheckpointSuite<ServeApi> {
 public:
  static std::string make_checkpoint(const TempDir& dir) { return train::tiny_checkpoint(dir); }
};

// A status and the error message of a JSON error body.
std::string error_message(const httplib::Result& r) { return r ? json_field(r->body, "error") : "(no reply)"; }

TEST_F(ServeApi, TtsAnswersTheLibrarysWavByGetPostFormMultipartAndHeader) {
  RunningServer s(synthesis_options(*checkpoint_), {});
  auto client = s.client();
  const auto get = client.Get("/api/tts?text=hello%20world.");
  ASSERT_TRUE(get);
  ASSERT_EQ(get->status, 200) << get->body;
  EXPECT_EQ(get->get_header_value("Content-Type"), "audio/wav");
  // The library's synthesis of the same text (noise position 0, as synthesize --text).
  train::SynthesisOptions o = synthesis_options(*checkpoint_);
  o.text = kHello;
  const train::SynthesisResult expected = train::synthesize(o);
  EXPECT_EQ(get->body, train::encode_wav16(expected.audio, expected.sample_rate));
  const WavFacts wav = wav_facts(get->body);
  EXPECT_EQ(wav.rate, 22050);
  EXPECT_EQ(wav.samples, (expected.mel.size(1) - 1) * 256);  // Griffin-Lim: (frames - 1) * hop

  const auto form = client.Post("/api/tts", "text=hello+world.", "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 200);
  EXPECT_EQ(form->body, get->body);
  const auto multipart = client.Post("/api/tts", httplib::MultipartFormDataItems{{"text", kHello, "", ""}});
  ASSERT_TRUE(multipart);
  EXPECT_EQ(multipart->status, 200);
  EXPECT_EQ(multipart->body, get->body);
  const auto header = client.Get("/api/tts", httplib::Headers{{"text", kHello}});
  ASSERT_TRUE(header);
  EXPECT_EQ(header->status, 200);
  EXPECT_EQ(header->body, get->body);
  // Coqui's own page sends empty speaker_id, style_wav and language_id to a single-speaker model.
  const auto coqui = client.Get("/api/tts?text=hello%20world.&speaker_id=&style_wav=&language_id=");
  ASSERT_TRUE(coqui);
  EXPECT_EQ(coqui->status, 200);
  EXPECT_EQ(coqui->body, get->body);
}

// The MaryTTS API that Coqui's server offers too: /locales, /voices, /process.
TEST_F(ServeApi, MaryTtsClientsGetTheSameWav) {
  RunningServer s(synthesis_options(*checkpoint_), {});
  auto client = s.client();
  const auto tts = client.Get("/api/tts?text=hello%20world.");
  EXPECT_EQ(client.Get("/locales")->body, "en\n");
  EXPECT_EQ(client.Get("/voices")->body, "default en u\n");
  const auto get = client.Get("/process?INPUT_TEXT=hello%20world.&INPUT_TYPE=TEXT&OUTPUT_TYPE=AUDIO&AUDIO=WAVE_FILE"
                              "&LOCALE=en&VOICE=default");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->get_header_value("Content-Type"), "audio/wav");
  EXPECT_EQ(get->body, tts->body);
  const auto post = client.Post("/process", "INPUT_TEXT=hello+world.&VOICE=default", "application/x-www-form-urlencoded");
  EXPECT_EQ(post->body, tts->body);
  const auto empty = client.Get("/process?INPUT_TEXT=");
  EXPECT_EQ(empty->status, 400);
  EXPECT_NE(error_message(empty).find("INPUT_TEXT: empty"), std::string::npos) << empty->body;

  RunningServer multi(synthesis_options(train::tiny_checkpoint(*dir_, 3)), {});
  EXPECT_EQ(multi.client().Get("/voices")->body, "0 en u\n1 en u\n2 en u\n");
  EXPECT_EQ(multi.client().Get("/process?INPUT_TEXT=hello%20world.&VOICE=2")->body,
            multi.client().Get("/api/tts?text=hello%20world.&speaker_id=2")->body);
  const auto voice = multi.client().Get("/process?INPUT_TEXT=hi&VOICE=7");
  EXPECT_EQ(voice->status, 400);
  EXPECT_NE(error_message(voice).find("VOICE 7: out of range"), std::string::npos) << voice->body;
}

TEST_F(ServeApi, MelAndDurationsAgreeWithTheWav) {
  RunningServer s(synthesis_options(*checkpoint_), {});
  auto client = s.client();
  train::SynthesisOptions o = synthesis_options(*checkpoint_);
  o.text = kHello;
  const train::SynthesisResult expected = train::synthesize(o);
  const int64_t frames = expected.mel.size(1);

  const auto mel = client.Get("/api/mel?text=hello%20world.");
  ASSERT_TRUE(mel);
  ASSERT_EQ(mel->status, 200) << mel->body;
  EXPECT_EQ(mel->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json_field(mel->body, "n_mels"), "80");
  EXPECT_EQ(json_field(mel->body, "frames"), std::to_string(frames));
  EXPECT_EQ(json_field(mel->body, "frame_rate"), "86.1328");  // 22050 / 256
  const std::vector<double> values = json_numbers(json_field(mel->body, "mel"));
  ASSERT_EQ(static_cast<int64_t>(values.size()), 80 * frames);
  const torch::Tensor got = torch::tensor(values, torch::kFloat64).reshape({80, frames});
  // [n_mels][frames], each value to six significant digits.
  EXPECT_LE((got - expected.mel.to(torch::kFloat64)).abs().max().item<double>(),
            1e-5 * expected.mel.abs().max().item<double>());

  const auto durations = client.Post("/api/durations", "text=hello+world.", "application/x-www-form-urlencoded");
  ASSERT_TRUE(durations);
  ASSERT_EQ(durations->status, 200) << durations->body;
  const std::vector<std::string> tokens = json_strings(json_field(durations->body, "tokens"));
  EXPECT_EQ(tokens, (std::vector<std::string>{"h", "e", "l", "l", "o", " ", "w", "o", "r", "l", "d", "."}));
  const std::vector<double> per_token = json_numbers(json_field(durations->body, "frames"));
  ASSERT_EQ(per_token.size(), tokens.size());
  const torch::Tensor expected_frames = expected.alignment.sum(1);
  for (size_t k = 0; k < per_token.size(); ++k) {
    EXPECT_EQ(per_token[k], expected_frames[static_cast<int64_t>(k)].item<double>()) << k;
  }
  EXPECT_EQ(std::accumulate(per_token.begin(), per_token.end(), 0.0), static_cast<double>(frames));
  EXPECT_EQ(json_field(durations->body, "total_frames"), std::to_string(frames));
}

// Eight requests at once with --max-batch 4 and a 1 s gathering window (it ends once 4 are
// there): batches of more than one, and each text says what it says alone (mel within 1e-5 of
// its range).
TEST_F(ServeApi, ConcurrentRequestsRunAsOneBatchAndSayWhatTheySayAlone) {
  ServeOptions options;
  options.max_batch = 4;
  options.batch_wait_ms = 1000;
  RunningServer s(synthesis_options(*checkpoint_), options);
  const std::vector<std::string> texts = {"hello world.", "a much longer sentence than the first.", "yes.",
                                          "good morning, how are you?", "short one.", "the quick brown fox.",
                                          "one more.", "and the last of eight."};
  std::vector<std::future<std::string>> replies;
  for (const std::string& text : texts) {
    replies.push_back(std::async(std::launch::async, [&s, text] {
      auto client = s.client();
      const auto r = client.Get("/api/mel", httplib::Params{{"text", text}}, httplib::Headers{});
      return r && r->status == 200 ? r->body : std::string("failed");
    }));
  }
  train::Synthesizer alone([&] {
    auto o = synthesis_options(*checkpoint_);
    o.speaker = train::kSpeakerLater;
    return o;
  }());
  for (size_t k = 0; k < texts.size(); ++k) {
    const std::string body = replies[k].get();
    ASSERT_NE(body, "failed") << texts[k];
    const torch::Tensor expected = alone.say(texts[k]).mel.to(torch::kFloat64);
    const std::vector<double> values = json_numbers(json_field(body, "mel"));
    ASSERT_EQ(static_cast<int64_t>(values.size()), expected.numel()) << texts[k];
    const torch::Tensor got = torch::tensor(values, torch::kFloat64).reshape(expected.sizes());
    EXPECT_LE((got - expected).abs().max().item<double>(), 1e-5 * expected.abs().max().item<double>()) << texts[k];
  }
  const ServiceStats stats = s.server().stats();
  EXPECT_EQ(stats.served, 8);
  EXPECT_GE(stats.largest_batch, 2);
  EXPECT_LE(stats.largest_batch, 4);
  EXPECT_LT(stats.batches, 8);
  const auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json_field(health->body, "served"), "8");
  EXPECT_EQ(json_field(health->body, "largest_batch"), std::to_string(stats.largest_batch));
}

TEST_F(ServeApi, BadRequestsGetTheirStatusAndAMessage) {
  ServeOptions options;
  options.max_chars = 40;
  RunningServer s(synthesis_options(*checkpoint_), options);
  auto client = s.client();
  const auto empty = client.Get("/api/tts?text=");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 400);
  EXPECT_EQ(empty->get_header_value("Content-Type"), "application/json");
  EXPECT_NE(error_message(empty).find("text: empty"), std::string::npos) << empty->body;
  EXPECT_EQ(client.Get("/api/tts")->status, 400);  // no text at all
  EXPECT_EQ(client.Post("/api/mel", "text=+++", "application/x-www-form-urlencoded")->status, 400);  // spaces only
  const auto nothing = client.Get("/api/tts?text=%20.%20");
  EXPECT_EQ(nothing->status, 400);
  EXPECT_NE(error_message(nothing).find("nothing to say"), std::string::npos) << nothing->body;
  const auto longer = client.Get("/api/tts", httplib::Params{{"text", std::string(41, 'a')}}, httplib::Headers{});
  EXPECT_EQ(longer->status, 413);
  EXPECT_NE(error_message(longer).find("text: 41 characters, more than --max-chars 40"), std::string::npos)
      << longer->body;
  // Characters, not bytes, are counted: 40 e-acute (80 bytes) pass the limit, 41 do not.
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xC3\xA9";
  EXPECT_NE(client.Get("/api/tts", httplib::Params{{"text", accents}}, httplib::Headers{})->status, 413);
  const auto accents41 = client.Get("/api/tts", httplib::Params{{"text", accents + "\xC3\xA9"}}, httplib::Headers{});
  EXPECT_EQ(accents41->status, 413);
  EXPECT_NE(error_message(accents41).find("text: 41 characters"), std::string::npos) << accents41->body;

  const auto put = client.Put("/api/tts", "text=hi", "application/x-www-form-urlencoded");
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->get_header_value("Allow"), "GET, POST");
  EXPECT_NE(error_message(put).find("PUT /api/tts: method not allowed; use GET, POST"), std::string::npos);
  EXPECT_EQ(client.Delete("/api/durations")->status, 405);
  EXPECT_EQ(client.Post("/", "", "text/plain")->status, 405);
  EXPECT_EQ(client.Post("/health", "", "text/plain")->status, 405);
  const auto missing = client.Get("/api/speak");
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(error_message(missing).find("/api/speak: no such path"), std::string::npos) << missing->body;

  // Over the frame budget: 413 naming --max-frames.
  train::SynthesisOptions tight = synthesis_options(*checkpoint_);
  tight.max_frames = 2;
  RunningServer budget(tight, {});
  const auto over = budget.client().Get("/api/tts?text=hello%20world.");
  EXPECT_EQ(over->status, 413);
  EXPECT_NE(error_message(over).find("more than --max-frames 2"), std::string::npos) << over->body;
}

// A text with nothing to say in a batch fails alone: the batch's other texts are said.
TEST_F(ServeApi, ABadTextInABatchFailsAlone) {
  ServeOptions options;
  options.max_batch = 4;
  options.batch_wait_ms = 1000;
  RunningServer s(synthesis_options(*checkpoint_), options);
  std::vector<std::future<int>> statuses;
  for (const char* text : {"hello world.", " . ", "yes.", "short one."}) {
    statuses.push_back(std::async(std::launch::async, [&s, text] {
      const auto r = s.client().Get("/api/tts", httplib::Params{{"text", text}}, httplib::Headers{});
      return r ? r->status : -1;
    }));
  }
  EXPECT_EQ(statuses[0].get(), 200);
  EXPECT_EQ(statuses[1].get(), 400);
  EXPECT_EQ(statuses[2].get(), 200);
  EXPECT_EQ(statuses[3].get(), 200);
  EXPECT_EQ(s.server().stats().served, 3);
  EXPECT_EQ(s.server().stats().failed, 1);
}

TEST_F(ServeApi, AMultiSpeakerModelTakesSpeakerIdInRange) {
  const std::string multi = train::tiny_checkpoint(*dir_, 3);
  RunningServer s(synthesis_options(multi), {});
  auto client = s.client();
  const auto info = client.Get("/api/info");
  ASSERT_TRUE(info);
  EXPECT_EQ(json_field(info->body, "speakers"), "3");
  const auto two = client.Get("/api/tts?text=hello%20world.&speaker_id=2");
  ASSERT_EQ(two->status, 200) << two->body;
  train::SynthesisOptions o = synthesis_options(multi);
  o.speaker = 2;
  o.text = kHello;
  const train::SynthesisResult expected = train::synthesize(o);
  EXPECT_EQ(two->body, train::encode_wav16(expected.audio, expected.sample_rate));
  EXPECT_EQ(client.Get("/api/tts", httplib::Headers{{"text", kHello}, {"speaker-id", "2"}})->body, two->body);
  EXPECT_NE(client.Get("/api/tts?text=hello%20world.&speaker_id=0")->body, two->body);

  const auto out = client.Get("/api/tts?text=hi&speaker_id=3");
  EXPECT_EQ(out->status, 400);
  EXPECT_NE(error_message(out).find("speaker_id 3: out of range; this model has 3 speakers: 0..2"), std::string::npos)
      << out->body;
  const auto word = client.Get("/api/tts?text=hi&speaker_id=p225");
  EXPECT_EQ(word->status, 400);
  EXPECT_NE(error_message(word).find("speaker_id 'p225': not a speaker number; give 0..2"), std::string::npos);
  EXPECT_EQ(client.Get("/api/tts?text=hi&speaker_id=-1")->status, 400);
  const auto none = client.Get("/api/tts?text=hi");
  EXPECT_EQ(none->status, 400);
  EXPECT_NE(error_message(none).find("give speaker_id=0..2 (or start serve with --speaker)"), std::string::npos);
  // --speaker: the speaker of a request that names none.
  train::SynthesisOptions with_default = synthesis_options(multi);
  with_default.speaker = 2;
  RunningServer d(with_default, {});
  EXPECT_EQ(d.client().Get("/api/tts?text=hello%20world.")->body, two->body);
}

TEST_F(ServeApi, ThePageAndInfoAreServed) {
  RunningServer s(synthesis_options(*checkpoint_), {});
  auto client = s.client();
  const auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  for (const char* id : {"id=\"text\"", "id=\"speaker\"", "id=\"play\"", "id=\"download\"", "id=\"alignment\""}) {
    EXPECT_NE(page->body.find(id), std::string::npos) << id;
  }
  const auto info = client.Get("/api/info");
  EXPECT_EQ(json_field(info->body, "speakers"), "1");
  EXPECT_EQ(json_field(info->body, "sample_rate"), "22050");
  EXPECT_EQ(json_field(info->body, "step"), "7");
  EXPECT_EQ(json_field(info->body, "max_chars"), "1000");
}

// The tool: defaults in --help, and errors that name the flag typed (exit 1).
TEST_F(ServeApi, TheToolShowsDefaultsAndNamesItsFlags) {
  const std::string exe = MONOFLOW_SERVE_EXE;
  int status = 0;
  const std::string help = train::testing::run_command(exe + " --help 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (const char* shown : {"--port INT:INT in [0 - 65535]=5002", "--host TEXT=127.0.0.1", "--queue INT:POSITIVE=64",
                            "--max-batch INT:POSITIVE=8", "--max-chars INT:POSITIVE=1000", "--device TEXT=auto"}) {
    EXPECT_NE(help.find(shown), std::string::npos) << shown << "\n" << help;
  }
  RunningServer taken(synthesis_options(*checkpoint_), {});
  // timeout: a serve that starts where it should refuse would otherwise keep the test waiting.
  const std::string base = "timeout 60 " + exe + " --device cpu --checkpoint " + *checkpoint_;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --port " + std::to_string(taken.port()),
       "serve: error: --host 127.0.0.1 --port " + std::to_string(taken.port()) + ": cannot listen there"},
      {" --speaker 1", "serve: error: --speaker 1: "},
      {" --set train.batchsize=3", "unknown key 'train.batchsize'"},
      {" --queue 0", "--queue: Value 0 not in range"},
  };
  for (const auto& [args, message] : cases) {
    const std::string out = train::testing::run_command(base + args + " 2>&1", &status);
    EXPECT_NE(WEXITSTATUS(status), 0) << args;
    EXPECT_NE(out.find(message), std::string::npos) << args << ": " << out;
  }
}

// The checks made before a request is queued, without a server.
TEST(ServeRequest, TextAndSpeakerAreCheckedBeforeQueueing) {
  RequestLimits single;
  single.max_chars = 5;
  EXPECT_EQ(check_request(" \t\n", "", single).status, 400);
  EXPECT_EQ(check_request("abcde", "7", single).status, 200);  // a single-speaker model ignores speaker_id
  EXPECT_EQ(check_request("abcde", "7", single).speaker, -1);
  EXPECT_EQ(check_request("abcdef", "", single).status, 413);
  RequestLimits multi = single;
  multi.n_speakers = 4;
  EXPECT_EQ(check_request("abc", "3", multi).speaker, 3);
  for (const char* bad : {"4", "-1", "1.5", " 1", "+1", "1x", ""}) EXPECT_EQ(check_request("abc", bad, multi).status, 400) << bad;
  multi.default_speaker = 1;
  EXPECT_EQ(check_request("abc", "", multi).speaker, 1);
}

}  // namespace
}  // namespace monoflow::serve

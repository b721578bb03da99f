// Word timings of espeak-ng speech (data/text/word_timing.h, speech.h): the rule on made-up
// events, then a real synthesis when libespeak-ng is compiled in.
#include <gtest/gtest.h>

#include <thread>

#include "common/error.h"
#include "data/text/phonemizer.h"
#include "data/text/speech.h"
#include "data/text/word_timing.h"

namespace monoflow::text {
namespace {

SpeechEvent word(int ms, int position, int length) {
  SpeechEvent e;
  e.kind = SpeechEvent::Kind::kWord;
  e.audio_ms = ms;
  e.text_position = position;
  e.length = length;
  return e;
}

SpeechEvent phoneme(int ms, const std::string& name) {
  SpeechEvent e;
  e.kind = SpeechEvent::Kind::kPhoneme;
  e.audio_ms = ms;
  e.phoneme = name;
  return e;
}

SpeechEvent clause_end(int ms) {
  SpeechEvent e;
  e.kind = SpeechEvent::Kind::kClauseEnd;
  e.audio_ms = ms;
  return e;
}

// The shape of what espeak-ng reported for "at 7:15, exactly." (en-us, 160 wpm).
TEST(WordTimings, EndAtThePauseOrTheNextWordAndSkipTheClosingMarker) {
  const std::string text = "at 7:15, exactly.";
  const std::vector<SpeechEvent> events = {
      word(0, 1, 2),      phoneme(12, "a"),  phoneme(110, "t"),                        // "at"
      word(160, 4, 1),    phoneme(170, "s"), phoneme(400, "n"),                        // "7": runs into "15"
      word(600, 6, 2),    phoneme(610, "f"), phoneme(900, "n"), phoneme(980, "_:"),    // "15", then a pause
      phoneme(1150, "_"), clause_end(1150),                                            //
      word(1150, 10, 7),  phoneme(1160, "E"), phoneme(1500, "i"), phoneme(1600, "_"),  // "exactly", pause
      word(1610, 17, 0),  phoneme(1620, "_"), clause_end(1700)};                       // the closing marker
  const auto words = word_timings(events, text, 1.7);
  ASSERT_EQ(words.size(), 4u);
  EXPECT_EQ(words[0].word, "at");
  EXPECT_DOUBLE_EQ(words[0].start_s, 0.0);
  EXPECT_DOUBLE_EQ(words[0].end_s, 0.160);   // the next word's start
  EXPECT_EQ(words[1].word, "7");
  EXPECT_DOUBLE_EQ(words[1].end_s, 0.600);
  EXPECT_EQ(words[2].word, "15");
  EXPECT_DOUBLE_EQ(words[2].start_s, 0.600);
  EXPECT_DOUBLE_EQ(words[2].end_s, 0.980);   // the pause, not the next word at 1.150
  EXPECT_EQ(words[3].word, "exactly");
  EXPECT_DOUBLE_EQ(words[3].start_s, 1.150);
  EXPECT_DOUBLE_EQ(words[3].end_s, 1.600);
  EXPECT_EQ(word_timings_tsv({words[0]}), "word\tstart_s\tend_s\nat\t0.000\t0.160\n");
}

TEST(WordTimings, APauseBeforeTheFirstSoundDoesNotEndTheWordAndTimesStayInTheAudio) {
  const std::vector<SpeechEvent> events = {word(0, 1, 2), phoneme(0, "_"), phoneme(50, "o"), clause_end(300),
                                           word(300, 4, 3), phoneme(310, "t"), phoneme(400, "u")};
  const auto words = word_timings(events, "oh two", 0.35);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_DOUBLE_EQ(words[0].end_s, 0.300);  // the clause end, not the leading pause at 0
  EXPECT_EQ(words[1].word, "two");
  EXPECT_DOUBLE_EQ(words[1].end_s, 0.35);   // no pause, no next word: the end of the audio
  const auto clipped = word_timings(events, "oh two", 0.2);
  EXPECT_DOUBLE_EQ(clipped[1].start_s, 0.2);
  EXPECT_DOUBLE_EQ(clipped[1].end_s, 0.2);
}

// espeak-ng speaks "was the" as one word with one event: the entry names and spans both.
TEST(WordTimings, AWordSpokenJoinedToTheNextNamesBoth) {
  const std::vector<SpeechEvent> events = {word(0, 1, 2),     phoneme(0, "I"),    word(150, 4, 3),
                                           phoneme(150, "w"), phoneme(350, "D"),  phoneme(400, "@2"),
                                           word(450, 12, 3),  phoneme(460, "T"),  phoneme(700, "_:")};
  const auto words = word_timings(events, "It was the 3rd.", 0.8);
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[0].word, "It");
  EXPECT_EQ(words[1].word, "was the");
  EXPECT_DOUBLE_EQ(words[1].start_s, 0.150);
  EXPECT_DOUBLE_EQ(words[1].end_s, 0.450);
  EXPECT_EQ(words[2].word, "3rd");  // the last word runs to the text's last letter
  EXPECT_DOUBLE_EQ(words[2].end_s, 0.700);
}

TEST(Speech, EspeakWordsFollowTheTextInsideTheAudio) {
  if (!espeak_compiled_in()) {
    EXPECT_THROW(speak("hello", {}), UserError);
    GTEST_SKIP() << "built without libespeak-ng";
  }
  const Speech s = speak("The quick brown fox, jumps over the dog.", {});
  EXPECT_EQ(s.sample_rate, 22050);
  const double total = static_cast<double>(s.samples.size()) / s.sample_rate;
  EXPECT_GT(total, 1.5);
  const std::vector<std::string> expected = {"The", "quick", "brown", "fox", "jumps", "over", "the", "dog"};
  ASSERT_EQ(s.words.size(), expected.size());
  double last_end = 0;
  for (size_t i = 0; i < s.words.size(); ++i) {
    EXPECT_EQ(s.words[i].word, expected[i]);
    EXPECT_GE(s.words[i].start_s, last_end - 1e-9) << i;
    EXPECT_GT(s.words[i].end_s, s.words[i].start_s) << i;
    EXPECT_LE(s.words[i].end_s, total) << i;
    last_end = s.words[i].end_s;
  }
  // The comma is a pause: "fox" ends well before "jumps" starts.
  EXPECT_GT(s.words[4].start_s - s.words[3].end_s, 0.05);
  // A repeat in the same process differs by a few samples (espeak-ng's wave generator carries
  // its state over; tools/speak renders each text in a fresh process, byte for byte what the
  // espeak-ng command writes), and its words by a millisecond at most.
  const Speech again = speak("The quick brown fox, jumps over the dog.", {});
  EXPECT_NEAR(static_cast<double>(again.samples.size()), static_cast<double>(s.samples.size()), 10.0);
  ASSERT_EQ(again.words.size(), s.words.size());
  for (size_t i = 0; i < s.words.size(); ++i) {
    EXPECT_NEAR(again.words[i].start_s, s.words[i].start_s, 0.0015) << i;
    EXPECT_NEAR(again.words[i].end_s, s.words[i].end_s, 0.0015) << i;
  }
  // The phonemizer still works alongside.
  EXPECT_FALSE(Phonemizer("en-us").phonemize("hello").empty());
  SpeakOptions slow;
  slow.words_per_minute = 80;
  EXPECT_GT(speak("The quick brown fox.", slow).samples.size(), speak("The quick brown fox.", {}).samples.size());
  slow.words_per_minute = 20;
  EXPECT_THROW(speak("x", slow), UserError);
  SpeakOptions nobody;
  nobody.voice = "xx-yy";  // neither a voice nor a language
  EXPECT_THROW(speak("x", nobody), UserError);
}

}  // namespace
}  // namespace monoflow::text

// --verify-integrity's SHA-256 against FIPS 180-4's example messages (one block, the two-block
// padding case of a 56-byte message, a million bytes fed in uneven pieces) and the empty one.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "training/checkpointing/sha256.h"

namespace megatron::training {
namespace {

std::string digest(const std::string& text) {
  Sha256 sha;
  sha.update(text.data(), text.size());
  return sha.hex_digest();
}

TEST(Sha256, ExampleMessagesOfTheStandard) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, AMillionAsInUnevenPieces) {
  const std::string a(1000000, 'a');
  Sha256 sha;
  for (size_t at = 0, piece = 1; at < a.size(); at += piece, piece = piece * 3 % 1031 + 1)
    sha.update(a.data() + at, std::min(piece, a.size() - at));
  EXPECT_EQ(sha.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace megatron::training

#include "grammar/lark_parser.h"
#include <gtest/gtest.h>
TEST(LarkParser, Smoke) {}

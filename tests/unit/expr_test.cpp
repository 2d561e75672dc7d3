#include "core/expr.hpp"

#include <gtest/gtest.h>

namespace d2k {
namespace {

TEST(Expr, Arithmetic) {
  ExprVars v{{"T", 1000}, {"H", 32}, {"B", 7}};
  EXPECT_DOUBLE_EQ(eval_expr("T * H", v), 32000);
  EXPECT_DOUBLE_EQ(eval_expr("2 * 4 * T * H + 4 * (B + 1)", v), 256032);
  EXPECT_DOUBLE_EQ(eval_expr("cdiv(T, 128)", v), 8);
  EXPECT_DOUBLE_EQ(eval_expr("fdiv(T, 128)", v), 7);
  EXPECT_DOUBLE_EQ(eval_expr("mod(T, 128)", v), 104);
  EXPECT_DOUBLE_EQ(eval_expr("min(T, H, B)", v), 7);
  EXPECT_DOUBLE_EQ(eval_expr("T >= B && H > 1", v), 1);
  EXPECT_DOUBLE_EQ(eval_expr("T < B", v), 0);
  EXPECT_DOUBLE_EQ(eval_expr("H == 32 ? 1 : 2", v), 1);
}

TEST(Expr, UnknownNameIsAnErrorNamingIt) {
  try {
    eval_expr("T * Q", {{"T", 1}});
    FAIL() << "no error";
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find("\"Q\""), std::string::npos) << e.what();
  }
}

TEST(Expr, SyntaxErrorsAndDivisionByZero) {
  EXPECT_THROW(eval_expr("T +* 2", {{"T", 1}}), ExprError);
  EXPECT_THROW(eval_expr("(T", {{"T", 1}}), ExprError);
  EXPECT_THROW(eval_expr("", {}), ExprError);
  EXPECT_THROW(eval_expr("cdiv(4, T)", {{"T", 0}}), ExprError);
  EXPECT_THROW(eval_expr("1 / T", {{"T", 0}}), ExprError);  // inf is not finite
  EXPECT_THROW(eval_expr(std::string(2000, '1'), {}), ExprError);
}

TEST(Expr, DimensionsMustBeSmallNonNegativeIntegers) {
  EXPECT_EQ(eval_dim("N + 1", {{"N", 5}}), 6);
  EXPECT_EQ(eval_dim("0", {}), 0);
  EXPECT_THROW(eval_dim("N / 2", {{"N", 5}}), ExprError);
  EXPECT_THROW(eval_dim("N - 6", {{"N", 5}}), ExprError);
  EXPECT_THROW(eval_dim("N * N * N", {{"N", 1e5}}), ExprError);
}

TEST(Expr, Identifiers) {
  EXPECT_TRUE(is_valid_identifier("T"));
  EXPECT_TRUE(is_valid_identifier("num_heads_2"));
  EXPECT_FALSE(is_valid_identifier("2T"));
  EXPECT_FALSE(is_valid_identifier("cdiv"));
  EXPECT_FALSE(is_valid_identifier("a-b"));
  EXPECT_FALSE(is_valid_identifier(""));
}

}  // namespace
}  // namespace d2k

#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>

#include "tensor/tensor.h"

using trainctl::DType;
using trainctl::Tensor;

TEST_CASE("Tensor::zeros owns aligned, zero-filled storage shared between copies", "[tensor]") {
  Tensor t = Tensor::zeros({3, 5});
  REQUIRE(t.defined());
  REQUIRE(t.owns_storage());
  REQUIRE(t.numel() == 15);
  REQUIRE(t.bytes() == 60);
  REQUIRE(t.rank() == 2);
  REQUIRE(t.dim(1) == 5);
  REQUIRE(t.device() == trainctl::Device::cpu);
  REQUIRE(reinterpret_cast<uintptr_t>(t.raw()) % 64 == 0);
  for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(t.f32()[i] == 0.0f);
  Tensor copy = t;
  copy.f32()[4] = 2.5f;
  REQUIRE(t.f32()[4] == 2.5f);  // shallow: same storage
  Tensor half = Tensor::zeros({7}, DType::bf16);
  REQUIRE(half.bytes() == 14);
  REQUIRE(Tensor::zeros({0, 4}).defined());
}

TEST_CASE("Tensor::borrow views foreign memory without owning it", "[tensor]") {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::borrow(buf + 2, {2, 2});
  REQUIRE_FALSE(t.owns_storage());
  REQUIRE(t.f32()[0] == 3.0f);
  REQUIRE(t.data<float>()[3] == 6.0f);
  REQUIRE_FALSE(Tensor().defined());
}

TEST_CASE("Tensor::f32 refuses other dtypes, dtype and shape helpers", "[tensor]") {
  Tensor t = Tensor::zeros({2}, DType::fp16);
  REQUIRE_THROWS_AS(t.f32(), std::runtime_error);
  REQUIRE_THROWS_WITH(t.f32(), Catch::Contains("fp16") && Catch::Contains("expected fp32"));
  REQUIRE(t.data<uint16_t>() != nullptr);
  REQUIRE(trainctl::dtype_size(DType::fp32) == 4);
  REQUIRE(trainctl::dtype_size(DType::bf16) == 2);
  REQUIRE(std::string(trainctl::dtype_name(DType::bf16)) == "bf16");
  REQUIRE(trainctl::numel_of({}) == 1);
  REQUIRE(trainctl::numel_of({768, 256}) == 196608);
  REQUIRE(trainctl::shape_string({768, 256}) == "[768, 256]");
  REQUIRE(trainctl::shape_string({}) == "[]");
  REQUIRE_THROWS_AS(trainctl::numel_of({2, -1}), std::invalid_argument);
  REQUIRE_THROWS_AS(Tensor::zeros({-3}), std::invalid_argument);
}

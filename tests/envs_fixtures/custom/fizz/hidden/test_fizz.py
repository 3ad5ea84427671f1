from fizz import fizzbuzz


def test_plain():
    assert [fizzbuzz(i) for i in (1, 3, 5)] == ["1", "Fizz", "Buzz"]


def test_fifteen():
    assert fizzbuzz(15) == "FizzBuzz" and fizzbuzz(30) == "FizzBuzz"

"""PerLoop (services/per_loop.py): one object per event loop, made once, and a closed loop's let go."""

import asyncio

from plugins_app.services.per_loop import PerLoop


def test_each_loop_gets_its_own_object_made_once_and_closed_loops_are_let_go():
    made = []
    per_loop = PerLoop(lambda loop: made.append(loop) or object())

    async def twice():
        return per_loop.get(), per_loop.get()

    first, again = asyncio.run(twice())
    assert first is again and len(made) == 1
    second, _ = asyncio.run(twice())   # a new loop: a new object
    assert second is not first and len(made) == 2
    assert made[0] is not made[1] and made[0].is_closed()
    assert list(per_loop._values) == [made[1]]   # the first loop's entry went when the second was made
